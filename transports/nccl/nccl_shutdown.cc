// NCCL transport: failure, abort and close. NCCL has no message to tell peers why a rank
// failed: ncclCommAbort ends this rank's part, and peers whose operations wait on it fail by
// NCCL's own error (a broken connection) or by their deadline, never a hang.
#include <thread>

#include "base/log.h"
#include "transports/nccl/nccl_transport.h"

namespace tidegate {
namespace nccl {

void NcclTransport::abort_comms() {
  for (ncclComm_t* comm : {&header_comm_, &data_comm_}) {
    if (*comm != nullptr) ncclCommAbort(*comm);  // also ends kernels still waiting on peers
    *comm = nullptr;
  }
}

// The first failure wins; every pending transfer fails with it, and NCCL's work is abandoned
// (a half-posted group or an unchecked header leaves the streams unpaired for good).
void NcclTransport::fail(const Status& status) {
  if (!failed_.is_ok()) return;
  failed_ = status;
  TG_LOG(kWarn, who_, "nccl transport failed: " + status.to_string());
  abort_comms();
  for (auto& entry : ops_) {
    Op& op = entry.second;
    if (op.stage == Stage::kDone) continue;
    op.stage = Stage::kDone;
    op.status = status;
  }
}

void NcclTransport::release_op(Op& op) {
  for (cudaEvent_t* event : {&op.header_event, &op.done_event}) {
    if (*event != nullptr) cudaEventDestroy(*event);
    *event = nullptr;
  }
  if (op.has_slot) (op.kind == Kind::kNative ? gathers_ : headers_).give(op.slot);
  op.has_slot = false;
}

void NcclTransport::release_resources() {
  for (auto& entry : ops_) release_op(entry.second);
  ops_.clear();
  headers_.release();
  gathers_.release();
  for (cudaStream_t* stream : {&header_stream_, &data_stream_}) {
    if (*stream != nullptr) cudaStreamDestroy(*stream);
    *stream = nullptr;
  }
}

// The settle loop watches abort_requested_, so the progress thread lets go of the mutex
// within one poll even in the middle of an enqueue.
void NcclTransport::abort(const Status& reason) {
  abort_requested_.store(true);
  wake();
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  const Status status = reason.is_ok() ? aborted_error(who_ + ": aborted") : reason;
  fail(status);
}

Status NcclTransport::close(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  if (closed_) return Status::ok();
  closed_ = true;
  // Before anything else: peers still finishing their own transfers must not read this
  // rank's closing connections as its process ending.
  if (exit_watch_) exit_watch_->say_goodbye();
  // A failed transport has nothing to flush (its communicators are aborted already).
  Status result = failed_.is_ok() ? finish(deadline) : Status::ok();
  abort_comms();  // whatever did not finalize cleanly
  if (failed_.is_ok()) failed_ = aborted_error(who_ + ": the nccl transport is closed");
  release_resources();
  return result;
}

// Lets enqueued work drain, then finalizes and destroys the communicators (non-blocking:
// polled), all bounded by `deadline`.
Status NcclTransport::finish(Deadline deadline) {
  for (cudaStream_t stream : {header_stream_, data_stream_}) {
    while (stream != nullptr && cudaStreamQuery(stream) == cudaErrorNotReady) {
      if (deadline.passed()) return timeout_error(who_ + ": nccl work still running at close");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  for (ncclComm_t* comm : {&header_comm_, &data_comm_}) {
    if (*comm == nullptr) continue;
    ncclResult_t state = ncclCommFinalize(*comm);
    while (state == ncclInProgress && !deadline.passed()) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(*comm, &state) != ncclSuccess) state = ncclInternalError;
    }
    if (state == ncclInProgress)
      return timeout_error(who_ + ": ncclCommFinalize did not finish in time");
    if (state != ncclSuccess) return nccl_error(who_, "ncclCommFinalize", state);
    ncclCommDestroy(*comm);
    *comm = nullptr;
  }
  return Status::ok();
}

NcclTransport::~NcclTransport() {
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  if (exit_watch_) exit_watch_->say_goodbye();  // a normal end, not an exit (idempotent)
  abort_comms();  // a transport destroyed without close() (or after a failed creation)
  release_resources();
}

}  // namespace nccl
}  // namespace tidegate
