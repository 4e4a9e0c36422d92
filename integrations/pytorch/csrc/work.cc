#include "work.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>

namespace tidegate_torch {

namespace {

// What tidegate's completion callback owns: a reference to the Work, and the pool it goes to.
struct Completion {
  c10::intrusive_ptr<TidegateWork> work;
  std::shared_ptr<CompletionPool> pool;
};

std::vector<c10::Device> cuda_devices_of(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : tensors) {
    if (!t.is_cuda()) continue;
    if (std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

TidegateWork::TidegateWork(int rank, c10d::OpType type, const char* collective,
                           std::vector<at::Tensor> result, const std::vector<at::Tensor>& inputs)
    : Work(rank, type, collective, inputs), collective_(collective), result_(std::move(result)) {
  // A Future over CUDA tensors records events on the streams current when it completes, so
  // completion runs on the stream the collective was ordered on (the current one now).
  const std::vector<c10::Device> devices = cuda_devices_of(result_);
  if (!devices.empty()) {
    stream_ = c10::impl::getDeviceGuardImpl(devices.front().type())->getStream(devices.front());
  }
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     devices);
}

void TidegateWork::keep_alive(const at::Tensor& tensor) { keep_alive_.push_back(tensor); }

void TidegateWork::copy_back(const at::Tensor& from, const at::Tensor& to) {
  copy_backs_.emplace_back(from, to);
}

void TidegateWork::attach(tidegate_request_t request, const std::shared_ptr<CompletionPool>& pool) {
  auto* completion = new Completion{c10::intrusive_ptr<TidegateWork>::reclaim_copy(this), pool};
  const tidegate_status_t status =
      tidegate_request_on_complete(request, &TidegateWork::on_request_done, completion);
  const std::string message = status == TIDEGATE_OK ? std::string() : tidegate_last_error();
  tidegate_request_free(request);  // the collective runs on; the callback still comes
  if (status != TIDEGATE_OK) {
    delete completion;
    complete(status, "could not register the completion callback: " + message);
  }
}

void TidegateWork::on_request_done(void* user_data, tidegate_status_t status) {
  std::unique_ptr<Completion> completion(static_cast<Completion*>(user_data));
  c10::intrusive_ptr<TidegateWork> work = std::move(completion->work);
  try {
    // Inside this callback tidegate_last_error() holds the collective's own message.
    std::string message = status == TIDEGATE_OK ? std::string() : tidegate_last_error();
    completion->pool->submit(
        [work, status, message = std::move(message)] { work->complete(status, message); });
  } catch (...) {
    // Out of memory for the task: completing here is better than never completing.
    work->complete(status, "");
  }
}

void TidegateWork::complete(tidegate_status_t status, const std::string& message) {
  std::optional<c10::StreamGuard> on_stream;
  if (stream_.has_value()) on_stream.emplace(*stream_);
  std::exception_ptr error;
  if (status == TIDEGATE_OK) {
    try {
      for (auto& [from, to] : copy_backs_) to.copy_(from);
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    error = make_error(collective_, status, message);
  }
  copy_backs_.clear();
  keep_alive_.clear();
  finish(error);
  // Marking the Future runs its callbacks here (user code: DDP comm hooks); one that throws
  // must not take the pool thread down.
  try {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(result_));
    }
  } catch (const std::exception& e) {
    TORCH_WARN("tidegate ", collective_, ": a callback of the Work's future threw: ", e.what());
  }
}

bool TidegateWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    lock.unlock();
    throw_error(collective_, TIDEGATE_ERR_TIMEOUT,
                "Work.wait(timeout=" + std::to_string(timeout.count()) +
                    " ms) expired before the collective finished; it keeps running: wait again, "
                    "or abort the process group");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TidegateWork::getFuture() { return future_; }

std::vector<at::Tensor> TidegateWork::result() { return result_; }

std::exception_ptr make_error(const char* what, tidegate_status_t status,
                              const std::string& message, bool backend_error_only) {
  const std::string text =
      std::string("tidegate ") + what + ": " + tidegate_status_string(status) + ": " + message;
  try {
    switch (backend_error_only ? TIDEGATE_ERR_INTERNAL : status) {
      case TIDEGATE_ERR_INVALID_ARGUMENT:
        C10_THROW_ERROR(ValueError, text);
      case TIDEGATE_ERR_UNSUPPORTED:
        C10_THROW_ERROR(NotImplementedError, text);
      default:
        C10_THROW_ERROR(DistBackendError, text);
    }
  } catch (...) {
    return std::current_exception();
  }
}

void throw_error(const char* what, tidegate_status_t status, const std::string& message,
                 bool backend_error_only) {
  std::rethrow_exception(make_error(what, status, message, backend_error_only));
}

}  // namespace tidegate_torch
