#include "completion_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace tidegate_torch {

struct CompletionPool::State {
  std::mutex mutex;
  std::condition_variable work_ready;   // a task was queued, or shutdown began
  std::condition_variable thread_left;  // a thread ended
  std::deque<std::function<void()>> tasks;
  int threads = 0;  // alive
  int idle = 0;     // alive and waiting for a task
  bool stopping = false;
};

namespace {

// The pool whose thread this is (so that shutdown() from a task does not wait for itself).
thread_local const void* t_pool_of_this_thread = nullptr;

}  // namespace

CompletionPool::CompletionPool() : state_(std::make_shared<State>()) {}

CompletionPool::~CompletionPool() { shutdown(); }

void CompletionPool::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->tasks.push_back(std::move(task));
  // Each queued task needs a thread of its own that is not busy: a busy thread may be inside a
  // callback that waits for exactly this task.
  if (static_cast<int>(state_->tasks.size()) <= state_->idle) {
    state_->work_ready.notify_one();
    return;
  }
  ++state_->threads;
  try {
    std::thread(run_worker, state_).detach();
  } catch (...) {
    // No thread could be started: the task stays queued for the next thread that frees up.
    --state_->threads;
  }
}

void CompletionPool::shutdown() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->work_ready.notify_all();
  const int self = t_pool_of_this_thread == state_.get() ? 1 : 0;
  state_->thread_left.wait(lock, [&] { return state_->threads <= self; });
}

int CompletionPool::threads() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->threads;
}

void CompletionPool::run_worker(const std::shared_ptr<State>& state) {
  t_pool_of_this_thread = state.get();
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    if (!state->tasks.empty()) {
      std::function<void()> task = std::move(state->tasks.front());
      state->tasks.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // release what it captured before taking the lock again
      lock.lock();
      continue;
    }
    if (state->stopping) break;
    ++state->idle;
    state->work_ready.wait(lock);
    --state->idle;
  }
  --state->threads;
  state->thread_left.notify_all();
}

}  // namespace tidegate_torch
