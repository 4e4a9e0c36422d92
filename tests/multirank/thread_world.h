// Test support: a "world" of N ranks as threads of this process, each with a real tidegate
// communicator (public C API, TCP transport over loopback) created through a shared in-memory
// store. Worlds are cached per size so the parameterised tests pay connection set-up once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/memory_store.h"
#include "tidegate/tidegate.h"

namespace tidegate::testing {

class ThreadWorld {
 public:
  // Creates `size` communicators concurrently (one thread per rank). Environment overrides
  // (e.g. TIDEGATE_TIMEOUT_MS) must be set before. Aborts the test on failure.
  explicit ThreadWorld(int size);
  ~ThreadWorld();

  int size() const { return static_cast<int>(comms_.size()); }
  tidegate_comm_t comm(int rank) const { return comms_[rank]; }

  // The caller destroyed every communicator itself: the destructor leaves them alone.
  void forget() { comms_.assign(comms_.size(), nullptr); }

  // Runs body(rank, comm) on one thread per rank and joins them all.
  void run(const std::function<void(int rank, tidegate_comm_t comm)>& body) const;

  // A world of this size shared by all tests in the binary (created on first use).
  static ThreadWorld& shared(int size);

  // tidegate_store_t callbacks over an in-memory store.
  static tidegate_store_t callbacks(MemoryStore* store);

 private:
  MemoryStore store_;
  std::vector<tidegate_comm_t> comms_;
};

}  // namespace tidegate::testing
