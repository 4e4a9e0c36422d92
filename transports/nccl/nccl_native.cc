// NCCL transport: native collectives. The ranks' headers are all-gathered first and checked on
// the host, so that ranks that posted different collectives fail with check_wire_header()'s
// error instead of running a collective with mismatched counts (which in NCCL hangs or
// corrupts memory). Every rank sees the same gathered headers, hence the same verdict: either
// every rank posts the collective or none does, and the communicator stays usable.
#include "transports/nccl/nccl_transport.h"

namespace tidegate {
namespace nccl {

namespace {

const char* native_name(NativeCollective kind) {
  switch (kind) {
    case NativeCollective::kAllreduce:
      return "allreduce";
    case NativeCollective::kAllgather:
      return "allgather";
    case NativeCollective::kReduceScatter:
      return "reduce_scatter";
  }
  return "native collective";
}

}  // namespace

Status NcclTransport::post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                                  Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  const DeviceGuard device_guard(device_);
  TG_RETURN_IF_ERROR(check_usable(rank_));
  const std::string what = std::string("native ") + native_name(args.kind);
  if (!supports_native(args.kind, args.dtype, args.reduce_op, args.memory)) {
    return unsupported(who_ + ": " + what + " of " + dtype_name(args.dtype) + " " +
                       reduce_op_name(args.reduce_op) + " on " +
                       (args.memory == TIDEGATE_MEMORY_CUDA ? "CUDA" : "host") +
                       " memory is not offered by the nccl transport (CUDA memory only)");
  }
  TG_CHECK_ARG(args.count >= 0, what + ": negative count " + std::to_string(args.count));
  TG_CHECK_ARG(
      args.kind == NativeCollective::kAllreduce || args.input != args.output || args.count == 0,
      what + ": input and output must differ (in place is offered for allreduce only)");
  if (args.count > 0) {
    TG_RETURN_IF_ERROR(check_device_pointer(args.input, (what + " input").c_str()));
    TG_RETURN_IF_ERROR(check_device_pointer(args.output, (what + " output").c_str()));
  }
  Op op;
  op.kind = Kind::kNative;
  op.peer = rank_;
  op.header = header;
  op.header.sender_rank = static_cast<uint32_t>(rank_);  // what the peers check against us
  op.native = args;
  if (!gathers_.take(&op.slot)) {
    return unsupported(who_ + ": more than " + std::to_string(kNativeSlots) +
                       " native collectives in flight; wait for some before posting more");
  }
  op.has_slot = true;
  const Handle h = next_handle_++;
  Op& placed = ops_.emplace(h, std::move(op)).first->second;
  Status st = post_native_headers(placed);
  if (!st.is_ok()) {
    fail(st);  // the gather may be half-posted: the data communicator is no longer in step
    return st;
  }
  *handle = h;
  return Status::ok();
}

// The caller's stream first (its producer of `input` must finish), then the header gather,
// then the copy of all headers to the host.
Status NcclTransport::post_native_headers(Op& op) {
  if (op.native.stream != nullptr) {
    cudaEvent_t ready = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ready, static_cast<cudaStream_t>(op.native.stream));
    if (e == cudaSuccess) e = cudaStreamWaitEvent(data_stream_, ready, 0);
    if (ready != nullptr) cudaEventDestroy(ready);  // the wait keeps the recorded point
    if (e != cudaSuccess) return cuda_error(who_, "ordering after the caller's stream", e);
  }
  const size_t mine = kWireHeaderBytes * static_cast<size_t>(rank_);
  char* device = static_cast<char*>(gathers_.device(op.slot));
  unsigned char* host = gathers_.host(op.slot);
  encode_wire_header(op.header, host + mine);
  cudaError_t e = cudaMemcpyAsync(device + mine, host + mine, kWireHeaderBytes,
                                  cudaMemcpyHostToDevice, data_stream_);
  if (e != cudaSuccess) return cuda_error(who_, "cudaMemcpyAsync of a native header", e);
  // In place: this rank's block already sits at its offset of the gather buffer.
  const ncclResult_t r =
      ncclAllGather(device + mine, device, kWireHeaderBytes, ncclUint8, data_comm_, data_stream_);
  TG_RETURN_IF_ERROR(settle(data_comm_, r, "the native header all-gather"));
  e = cudaMemcpyAsync(host, device, kWireHeaderBytes * static_cast<size_t>(size_),
                      cudaMemcpyDeviceToHost, data_stream_);
  if (e != cudaSuccess) return cuda_error(who_, "cudaMemcpyAsync of the gathered headers", e);
  TG_RETURN_IF_ERROR(record(&op.header_event, data_stream_));
  op.stage = Stage::kHeader;
  return Status::ok();
}

// A mismatch fails only this op: no rank posts the collective, so the streams stay in step.
Status NcclTransport::check_native_headers(Op& op, bool* moved) {
  *moved = true;
  const unsigned char* host = gathers_.host(op.slot);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const WireHeader received =
        decode_wire_header(host + kWireHeaderBytes * static_cast<size_t>(peer));
    WireHeader expected = op.header;
    expected.sender_rank = static_cast<uint32_t>(peer);
    Status st = check_wire_header(expected, received, rank_, peer);
    if (!st.is_ok()) {
      op.status = std::move(st);
      op.stage = Stage::kDone;
      return Status::ok();
    }
  }
  return post_collective(op);
}

Status NcclTransport::post_collective(Op& op) {
  const NativeCollectiveArgs& a = op.native;
  ncclDataType_t type;
  ncclRedOp_t red = ncclSum;
  TG_CHECK_INTERNAL(nccl_dtype(a.dtype, &type));
  if (a.kind != NativeCollective::kAllgather) TG_CHECK_INTERNAL(nccl_op(a.reduce_op, &red));
  const size_t count = static_cast<size_t>(a.count);
  ncclResult_t r = ncclSuccess;
  switch (a.kind) {
    case NativeCollective::kAllreduce:
      r = ncclAllReduce(a.input, a.output, count, type, red, data_comm_, data_stream_);
      break;
    case NativeCollective::kAllgather:
      r = ncclAllGather(a.input, a.output, count, type, data_comm_, data_stream_);
      break;
    case NativeCollective::kReduceScatter:
      r = ncclReduceScatter(a.input, a.output, count, type, red, data_comm_, data_stream_);
      break;
  }
  TG_RETURN_IF_ERROR(settle(data_comm_, r, native_name(a.kind)));
  TG_RETURN_IF_ERROR(record(&op.done_event, data_stream_));
  op.stage = Stage::kRunning;
  return Status::ok();
}

}  // namespace nccl
}  // namespace tidegate
