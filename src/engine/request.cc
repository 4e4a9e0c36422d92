#include "engine/request.h"

namespace tidegate {

void Request::complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
  }
  finished_.notify_all();
}

bool Request::test(Status* status) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) *status = status_;
  return done_;
}

Status Request::wait(Deadline deadline) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!finished_.wait_until(lock, deadline.at(), [&] { return done_; })) {
    return timeout_error(std::string(op_kind_name(args_.kind)) + " op #" +
                         std::to_string(args_.op_seq) +
                         " did not finish within the wait's timeout; it is still running (wait "
                         "again, or abort the communicator)");
  }
  return status_;
}

}  // namespace tidegate
