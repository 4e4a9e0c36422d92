// Threads that complete the backend's Work objects, off tidegate's progress thread.
//
// tidegate runs a request's completion callback on its progress thread, which must never block.
// Completing a c10d Work means copying staged results back and marking its Future, and marking
// a Future runs its `then` callbacks inline: PyTorch's PowerSGD hook, for one, waits inside such
// a callback for a collective posted from it. So completions run here instead, and the pool
// starts a new thread whenever a task would otherwise wait behind busy threads: a completion is
// never queued behind a callback that waits for it, so nested waits cannot deadlock.
#pragma once

#include <functional>
#include <memory>

namespace tidegate_torch {

class CompletionPool {
 public:
  CompletionPool();
  ~CompletionPool();  // shutdown()
  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;

  // Runs `task` on a pool thread: an idle one, or a new one when none is idle. Never blocks
  // for long (takes a mutex; may start a thread), so it may be called from tidegate's progress
  // thread. A task must not throw. Thread-safe.
  void submit(std::function<void()> task);

  // Runs the tasks already submitted, then lets the threads end. Returns once they have (a
  // thread that calls it from inside a task is not waited for). Later submits run on fresh
  // threads. Thread-safe.
  void shutdown();

  // Threads alive now (tests and diagnostics).
  int threads() const;

 private:
  struct State;
  static void run_worker(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;  // shared with the threads, which are detached
};

}  // namespace tidegate_torch
