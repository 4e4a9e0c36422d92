// A posted collective's completion state, shared between the caller's handle and the engine.
// Follows c10d Work's semantics: test() never blocks, wait() blocks up to a deadline, and a
// finished request keeps its final Status forever.
#pragma once

#include <condition_variable>
#include <mutex>

#include "collectives/collective_args.h"
#include "core/status.h"
#include "core/types.h"

namespace tidegate {

class Request {
 public:
  explicit Request(CollectiveArgs args) : args_(std::move(args)) {}

  // What the caller asked for (the engine reads it; it is immutable after posting).
  const CollectiveArgs& args() const { return args_; }

  // Records the final status and wakes every waiter. Only the first call counts.
  void complete(Status status);

  // Non-blocking: true when finished, with the final status in *status.
  bool test(Status* status) const;

  // Blocks until finished or the deadline; TIMEOUT (naming the op) if the deadline came first.
  Status wait(Deadline deadline) const;

 private:
  const CollectiveArgs args_;
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
  Status status_;
};

}  // namespace tidegate
