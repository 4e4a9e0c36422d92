#include "engine/request.h"

namespace tidegate {

void Request::complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finishing_ || done_) return;
    finishing_ = true;
    status_ = std::move(status);
  }
  // The callbacks run before the request reads as done, so that a waiter released by wait()
  // finds every callback's effect (a future set, a counter bumped) already there. Callbacks
  // added meanwhile (by a callback, or by another thread) run in the same loop. status_ is
  // immutable from here on, so reading it unlocked is safe.
  while (true) {
    std::vector<Callback> callbacks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (callbacks_.empty()) {
        done_ = true;
        break;
      }
      callbacks.swap(callbacks_);
    }
    for (Callback& callback : callbacks) callback(status_);
  }
  finished_.notify_all();
}

bool Request::test(Status* status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) *status = status_;
  return done_;
}

Status Request::wait(Deadline deadline) const {
  Status status;
  if (wait_until(deadline.at(), &status)) return status;
  return timeout_error(std::string(op_kind_name(args_.kind)) + " op #" +
                       std::to_string(args_.op_seq) +
                       " did not finish within the wait's timeout; it is still running (wait "
                       "again, or abort the communicator)");
}

bool Request::wait_until(Clock::time_point until, Status* status) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!finished_.wait_until(lock, until, [&] { return done_; })) return false;
  *status = status_;
  return true;
}

void Request::on_complete(Callback callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(status_);
}

}  // namespace tidegate
