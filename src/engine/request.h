// A posted collective's completion state, shared between the caller's handle and the engine.
// Follows c10d Work's semantics: test() never blocks, wait() blocks up to a deadline, and a
// finished request keeps its final Status forever. A completion callback (for futures, e.g. the
// PyTorch backend's Work::getFuture) runs once when the request finishes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "collectives/collective_args.h"

namespace tidegate {

class Request {
 public:
  using Callback = std::function<void(const Status& status)>;

  explicit Request(CollectiveArgs args) : args_(std::move(args)) {}

  // What the caller asked for (the engine reads it; it is immutable after posting).
  const CollectiveArgs& args() const { return args_; }

  // Records the final status, runs the callbacks (on this thread, with no lock held), then
  // marks the request done and wakes every waiter. Only the first call counts.
  void complete(Status status);

  // Non-blocking: true when finished, with the final status in *status.
  bool test(Status* status) const;

  // Blocks until finished or the deadline; TIMEOUT (naming the op) if the deadline came first.
  Status wait(Deadline deadline) const;

  // Blocks until finished (true, final status in *status) or `until` (false).
  bool wait_until(Clock::time_point until, Status* status) const;

  // Runs `callback(final status)` once the request finishes: on the thread that completes it
  // (the one driving the communicator: its progress thread, or a caller of a blocking
  // collective running ops itself), or at once on this thread if it already finished.
  // Callbacks run in the order they were added. A callback must not block or wait for
  // another request of the same communicator (it would hold up the progress thread).
  // Thread-safe.
  void on_complete(Callback callback);

  // Payload bytes this rank sent for the op (set by the engine before it completes the op).
  void set_bytes_sent(uint64_t bytes) { bytes_sent_.store(bytes); }
  uint64_t bytes_sent() const { return bytes_sent_.load(); }

  // What ran the op, "transport/algorithm" (plus "+codec spec" when compressed): set by the
  // engine before it completes the op, read only after the request finished.
  void set_choice(std::string choice) { choice_ = std::move(choice); }
  const std::string& choice() const { return choice_; }

 private:
  const CollectiveArgs args_;
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool finishing_ = false;  // complete() was called; its callbacks may still be running
  bool done_ = false;       // finished and every callback has run
  Status status_;
  std::vector<Callback> callbacks_;  // guarded by mutex_; emptied when they run
  std::atomic<uint64_t> bytes_sent_{0};
  std::string choice_;  // written before complete(), read after finishing (ordered by mutex_)
};

}  // namespace tidegate
