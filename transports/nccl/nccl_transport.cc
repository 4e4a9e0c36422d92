// NCCL transport: posting, header checks, grouped payloads and completions (the design is
// described in nccl_transport.h).
#include "transports/nccl/nccl_transport.h"

#include <algorithm>
#include <thread>

#include "transports/common/transfer_arguments.h"

namespace tidegate {
namespace nccl {

Status NcclTransport::check_usable(int peer) const {
  if (!failed_.is_ok()) return failed_;
  if (closed_) return aborted_error(who_ + ": the nccl transport is closed");
  TG_CHECK_ARG(peer >= 0 && peer < size_, who_ + ": peer " + std::to_string(peer) +
                                              " is not a rank of " + std::to_string(size_));
  return Status::ok();
}

Status NcclTransport::new_op(Kind kind, int peer, const WireHeader& header, void* data,
                             size_t bytes, Handle* handle) {
  Op op;
  op.kind = kind;
  op.peer = peer;
  op.header = header;
  op.data = data;
  op.bytes = bytes;
  if (!headers_.take(&op.slot)) {
    return unsupported(who_ + ": more than " + std::to_string(kHeaderSlots) +
                       " nccl transfers in flight; wait for some before posting more");
  }
  op.has_slot = true;
  if (kind == Kind::kSend) {
    // The header goes to the device slot now; the stream orders the copy before the send.
    encode_wire_header(header, headers_.host(op.slot));
    const cudaError_t e = cudaMemcpyAsync(headers_.device(op.slot), headers_.host(op.slot),
                                          kWireHeaderBytes, cudaMemcpyHostToDevice, header_stream_);
    if (e != cudaSuccess) {
      headers_.give(op.slot);
      return cuda_error(who_, "cudaMemcpyAsync of a header", e);
    }
  }
  const Handle h = next_handle_++;
  ops_.emplace(h, std::move(op));
  *handle = h;
  return Status::ok();
}

Status NcclTransport::isend(int peer, uint32_t channel, const WireHeader& header,
                            const void* payload, size_t bytes, Handle* handle) {
  (void)channel;  // NCCL has no channels; see the header comment
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  TG_RETURN_IF_ERROR(check_usable(peer));
  TG_RETURN_IF_ERROR(check_send_arguments(header, payload, bytes));
  if (bytes > 0) TG_RETURN_IF_ERROR(check_device_pointer(payload, "the isend payload"));
  // NCCL only reads a send buffer.
  return new_op(Kind::kSend, peer, header, const_cast<void*>(payload), bytes, handle);
}

Status NcclTransport::irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload,
                            size_t bytes, Handle* handle) {
  (void)channel;
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  TG_RETURN_IF_ERROR(check_usable(peer));
  TG_RETURN_IF_ERROR(check_recv_arguments(expected, payload, bytes));
  if (expected.payload_bytes > 0)
    TG_RETURN_IF_ERROR(check_device_pointer(payload, "the irecv buffer"));
  return new_op(Kind::kRecv, peer, expected, payload, static_cast<size_t>(expected.payload_bytes),
                handle);
}

Status NcclTransport::settle(ncclComm_t comm, ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress) return nccl_error(who_, what, result);
  const Deadline deadline = Deadline::after_ms(deadline_ms_);
  ncclResult_t state = result;
  while (state == ncclInProgress) {
    if (abort_requested_.load())
      return aborted_error(who_ + ": aborted while NCCL was enqueueing " + what);
    if (deadline.passed())
      return timeout_error(who_ + ": NCCL did not finish enqueueing " + what + " in time");
    std::this_thread::yield();
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
  }
  return state == ncclSuccess ? Status::ok() : nccl_error(who_, what, state);
}

Status NcclTransport::record(cudaEvent_t* event, cudaStream_t stream) {
  if (*event == nullptr) {
    const cudaError_t e = cudaEventCreateWithFlags(event, cudaEventDisableTiming);
    if (e != cudaSuccess) return cuda_error(who_, "cudaEventCreate", e);
  }
  const cudaError_t e = cudaEventRecord(*event, stream);
  return e == cudaSuccess ? Status::ok() : cuda_error(who_, "cudaEventRecord", e);
}

// Every queued header in one group: an exchange's header send and receive run concurrently,
// and a send to this rank itself meets its receive (NCCL needs both in one group).
Status NcclTransport::post_header_group(bool* moved) {
  std::vector<Op*> batch;
  for (auto& [handle, op] : ops_) {
    if (op.kind != Kind::kNative && op.stage == Stage::kQueued) batch.push_back(&op);
  }
  if (batch.empty()) return Status::ok();
  *moved = true;
  ncclResult_t first = ncclGroupStart();
  for (Op* op : batch) {
    void* slot = headers_.device(op->slot);
    const ncclResult_t r =
        op->kind == Kind::kSend
            ? ncclSend(slot, kWireHeaderBytes, ncclUint8, op->peer, header_comm_, header_stream_)
            : ncclRecv(slot, kWireHeaderBytes, ncclUint8, op->peer, header_comm_, header_stream_);
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess) return nccl_error(who_, "ncclSend/ncclRecv of headers", first);
  TG_RETURN_IF_ERROR(settle(header_comm_, end, "a group of headers"));
  for (Op* op : batch) {
    if (op->kind == Kind::kRecv) {
      const cudaError_t e =
          cudaMemcpyAsync(headers_.host(op->slot), headers_.device(op->slot), kWireHeaderBytes,
                          cudaMemcpyDeviceToHost, header_stream_);
      if (e != cudaSuccess) return cuda_error(who_, "cudaMemcpyAsync of a received header", e);
    }
    TG_RETURN_IF_ERROR(record(&op->header_event, header_stream_));
    // A send's payload is ready at once (held back by post_payload_group's rule, though).
    op->stage = op->kind == Kind::kSend ? Stage::kPayloadReady : Stage::kHeader;
  }
  return Status::ok();
}

Status NcclTransport::finish_header(Op& op, Handle handle) {
  (void)handle;
  const WireHeader received = decode_wire_header(headers_.host(op.slot));
  Status st = check_wire_header(op.header, received, rank_, op.peer);
  if (!st.is_ok()) {
    op.status = st;
    op.stage = Stage::kDone;
    return st;  // the caller fails the transport: this peer's stream is no longer paired
  }
  // The sender's length, within a bounded receive's bound: NCCL pairs a send and a receive of
  // the same byte count.
  op.bytes = static_cast<size_t>(received.payload_bytes);
  op.stage = op.bytes > 0 ? Stage::kPayloadReady : Stage::kRunning;
  return Status::ok();
}

// Receives (and native ops) whose header copy finished are checked, in posting order.
Status NcclTransport::check_headers(bool* moved) {
  for (auto& [handle, op] : ops_) {
    if (op.stage != Stage::kHeader) continue;
    const cudaError_t e = cudaEventQuery(op.header_event);
    if (e == cudaErrorNotReady) continue;
    if (e != cudaSuccess) return cuda_error(who_, "cudaEventQuery of a header", e);
    *moved = true;
    if (op.kind == Kind::kNative) {
      TG_RETURN_IF_ERROR(check_native_headers(op, moved));
    } else {
      TG_RETURN_IF_ERROR(finish_header(op, handle));
    }
  }
  return Status::ok();
}

// Ready payloads go out as one group, but only once no receive waits for its header: then an
// exchange's payload send and payload receive share a group (see the header comment).
Status NcclTransport::post_payload_group(bool* moved) {
  std::vector<Op*> batch;
  for (auto& [handle, op] : ops_) {
    if (op.kind == Kind::kRecv && (op.stage == Stage::kQueued || op.stage == Stage::kHeader)) {
      return Status::ok();
    }
    if (op.kind != Kind::kNative && op.stage == Stage::kPayloadReady) batch.push_back(&op);
  }
  if (batch.empty()) return Status::ok();
  *moved = true;
  ncclResult_t first = ncclGroupStart();
  for (Op* op : batch) {
    if (op->bytes == 0) continue;
    const ncclResult_t r =
        op->kind == Kind::kSend
            ? ncclSend(op->data, op->bytes, ncclUint8, op->peer, data_comm_, data_stream_)
            : ncclRecv(op->data, op->bytes, ncclUint8, op->peer, data_comm_, data_stream_);
    if (first == ncclSuccess && r != ncclSuccess && r != ncclInProgress) first = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess) return nccl_error(who_, "ncclSend/ncclRecv of payloads", first);
  TG_RETURN_IF_ERROR(settle(data_comm_, end, "a group of payloads"));
  for (Op* op : batch) {
    if (op->bytes > 0) TG_RETURN_IF_ERROR(record(&op->done_event, data_stream_));
    op->stage = Stage::kRunning;
  }
  return Status::ok();
}

// A transfer is done when its stream work is, not when it was enqueued.
Status NcclTransport::poll_done(Op& op, bool* moved) {
  if (op.stage != Stage::kRunning) return Status::ok();
  for (cudaEvent_t event : {op.header_event, op.done_event}) {
    if (event == nullptr) continue;
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaErrorNotReady) return Status::ok();
    if (e != cudaSuccess) return cuda_error(who_, "cudaEventQuery", e);
  }
  op.stage = Stage::kDone;
  *moved = true;
  return Status::ok();
}

Status NcclTransport::step(bool* moved) {
  if (!failed_.is_ok() || closed_) return failed_;
  Status st = post_header_group(moved);
  if (st.is_ok()) st = check_headers(moved);
  if (st.is_ok()) st = post_payload_group(moved);
  for (auto& entry : ops_) {
    if (st.is_ok()) st = poll_done(entry.second, moved);
  }
  // After the events, so that what a dead peer sent before it died is taken first.
  if (st.is_ok() && exit_watch_) st = exit_watch_->poll(Clock::now());
  if (!st.is_ok()) fail(st);
  return failed_;
}

Status NcclTransport::test(Handle handle, bool* done, size_t* payload_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  auto it = ops_.find(handle);
  TG_CHECK_ARG(it != ops_.end(),
               "test: unknown or already finished transfer handle " + std::to_string(handle));
  bool moved = false;
  if (failed_.is_ok()) {
    Status st = poll_done(it->second, &moved);
    if (!st.is_ok()) fail(st);
  }
  *done = it->second.stage == Stage::kDone;
  if (!*done) return Status::ok();
  if (payload_bytes != nullptr) *payload_bytes = it->second.bytes;
  Status status = std::move(it->second.status);
  release_op(it->second);
  ops_.erase(it);
  return status;
}

Status NcclTransport::progress(Milliseconds max_wait, bool* activity) {
  *activity = false;
  const Deadline until = Deadline::after(max_wait);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const DeviceGuard device_guard(device_);
      bool moved = false;
      const Status st = step(&moved);
      *activity |= moved;
      if (!st.is_ok() || closed_) return st;
      if (moved || until.passed()) return Status::ok();
    }
    // CUDA events offer no file descriptor: nap briefly, or until wake().
    std::unique_lock<std::mutex> nap(wake_mutex_);
    const auto ms = std::min<int64_t>(kMaxSleepMs, until.remaining().count());
    wake_cv_.wait_for(nap, Milliseconds(ms), [&] { return woken_.load(); });
    if (woken_.exchange(false)) return Status::ok();
  }
}

void NcclTransport::wake() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    woken_.store(true);
  }
  wake_cv_.notify_all();
}

}  // namespace nccl
}  // namespace tidegate
