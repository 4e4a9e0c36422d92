// MPI transport: native collectives (MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block)
// offered to the planner as the algorithm "native".
//
// Header check: before any data moves, every rank's 64-byte WireHeader is allgathered on the
// collective communicator (unless the engine ran its own identity check for the op already,
// NativeCollectiveArgs::identity_checked: then the arguments are known to agree and the data
// collective is posted at once, one round sooner). Every rank then sees the same gathered headers
// and judges them the same way (rank 0's header against each other rank's, in rank order), so on a
// mismatch every rank fails the op with the identical error naming the two ranks and the field, and
// no rank posts the data collective: nothing hangs and the collective communicator stays in step.
//
// Ordering: MPI matches collectives on a communicator by posting order, so every rank must post
// the header exchanges and the data collectives in the same sequence. Ops are kept in
// native_queue_ in post order (the engine posts collectives in the same order everywhere), and
// the header exchange of an op is posted only once every earlier op has posted its data
// collective (or failed, which happens alike on every rank). Data collectives of successive
// ops still overlap; only the 64-byte exchanges are serialised.
//
// Types: float32/float64/int32/int64/uint8 map to MPI's types; MPI has no float16 or bfloat16,
// so those are unsupported for allreduce and reduce_scatter (allgather moves them as 16-bit
// integers: it never computes on them). SUM/PROD/MIN/MAX map to MPI's ops. AVG is MPI_SUM followed
// by tidegate's own finalize_average() on the output (the same kernel, so the same semantics as
// tidegate's algorithms: floats divide in their precision, integers truncate), computed by each
// rank on identical sums, so it stays identical across ranks.
//
// In place: allreduce and reduce_scatter with input == output, and allgather whose input is
// this rank's block of the output, become MPI_IN_PLACE (MPI forbids aliased buffers otherwise).
//
// Large counts (MPI-3 counts are `int`): allreduce is split into several MPI_Iallreduce calls
// of at most native_max_elements. allgather with more elements per rank uses a contiguous
// derived type of k elements when some k <= kMaxBlockElements divides the count. reduce_scatter
// cannot: MPI's predefined reduction ops are defined on predefined types only, so a block above
// the limit is UNSUPPORTED (tidegate's ring has no such limit).
//
// Abort: MPI cannot cancel (or free) a pending nonblocking collective. When the transport fails,
// a pending native op fails at once like any transfer, and the 200 ms drain of fail() gives the
// collective a chance to finish (it does when every rank had posted it). Otherwise its request
// stays with MPI, which may still write the output buffer until every rank has posted the
// collective; the caller must treat that buffer as undefined after an abort, and a job whose
// peer died cannot finish it at all (as with any MPI collective, MPI_Abort ends such a job).
#include <algorithm>
#include <string>

#include "numeric/reduce.h"
#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_util.h"

namespace tidegate {
namespace mpi {

namespace {

// Largest k tried for the contiguous block type of a huge allgather.
constexpr int64_t kMaxBlockElements = 4096;

// MPI's type for `dtype`, or MPI_DATATYPE_NULL. 16-bit floats have no MPI type to reduce in,
// but an allgather only moves bytes, so there they travel as 16-bit integers.
MPI_Datatype mpi_type(tidegate_dtype_t dtype, NativeCollective kind) {
  const bool moves_only = kind == NativeCollective::kAllgather;
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return MPI_FLOAT;
    case TIDEGATE_FLOAT64:
      return MPI_DOUBLE;
    case TIDEGATE_INT32:
      return MPI_INT32_T;
    case TIDEGATE_INT64:
      return MPI_INT64_T;
    case TIDEGATE_UINT8:
      return MPI_UINT8_T;
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      return moves_only ? MPI_UINT16_T : MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return MPI_SUM;  // AVG: divided afterwards, see above
    case TIDEGATE_PROD:
      return MPI_PROD;
    case TIDEGATE_MIN:
      return MPI_MIN;
    case TIDEGATE_MAX:
      return MPI_MAX;
  }
  return MPI_OP_NULL;
}

const char* kind_name(NativeCollective kind) {
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

// Smallest k <= kMaxBlockElements with count % k == 0 and count / k <= limit, or 0.
int64_t block_elements(int64_t count, int64_t limit) {
  for (int64_t k = (count + limit - 1) / limit; k <= kMaxBlockElements; ++k) {
    if (count % k == 0) return k;
  }
  return 0;
}

char* byte_at(void* base, int64_t elements, tidegate_dtype_t dtype) {
  return static_cast<char*>(base) + elements * static_cast<int64_t>(dtype_size(dtype));
}

}  // namespace

bool MpiTransport::supports_native(NativeCollective kind, tidegate_dtype_t dtype,
                                   tidegate_reduce_op_t op, tidegate_memory_t memory) const {
  if (memory != TIDEGATE_MEMORY_HOST || mpi_type(dtype, kind) == MPI_DATATYPE_NULL) return false;
  if (kind == NativeCollective::kAllgather) return true;
  // A reduction MPI computes differently from tidegate (mpi_semantics.h) is not offered.
  return mpi_op(op) != MPI_OP_NULL && (agreeing_reductions_ & reduction_bit(dtype, op)) != 0;
}

// Local checks, made before the op is queued so that an unsupported op fails at once.
Status MpiTransport::check_native_args(const NativeCollectiveArgs& args) const {
  const std::string what = who_ + ": native " + std::string(kind_name(args.kind));
  if (!supports_native(args.kind, args.dtype, args.reduce_op, args.memory)) {
    return unsupported(what + " is not offered by the mpi transport for dtype " +
                       dtype_name(args.dtype) + ", op " + reduce_op_name(args.reduce_op) +
                       (args.memory == TIDEGATE_MEMORY_HOST
                            ? " (MPI has no float16/bfloat16 type, or its reduction computes "
                              "other values on overflow, NaN or -0 than tidegate's: see "
                              "tidegate.h, reduction semantics); use tidegate's own algorithms"
                            : " on device memory (host memory only)"));
  }
  TG_CHECK_ARG(args.count >= 0, what + ": negative count");
  TG_CHECK_ARG(args.count == 0 || (args.input != nullptr && args.output != nullptr),
               what + ": null buffer");
  if (args.count <= native_max_elements_) return Status::ok();
  if (args.kind == NativeCollective::kReduceScatter) {
    return unsupported(what + " of " + std::to_string(args.count) +
                       " elements per rank exceeds MPI's int count (" +
                       std::to_string(native_max_elements_) +
                       "), and MPI's reduction ops take no derived types; use reduce_scatter=ring");
  }
  if (args.kind == NativeCollective::kAllgather &&
      block_elements(args.count, native_max_elements_) == 0) {
    return unsupported(what + " of " + std::to_string(args.count) +
                       " elements per rank exceeds MPI's int count and has no divisor up to " +
                       std::to_string(kMaxBlockElements) +
                       " to build a block type from; use "
                       "allgather=ring");
  }
  return Status::ok();
}

Status MpiTransport::post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                                 Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_.is_ok()) return failed_;
  if (closed_) return aborted_error(who_ + ": the mpi transport is closed");
  TG_RETURN_IF_ERROR(check_native_args(args));
  Op* added = nullptr;
  const Handle h = book_.add(&added);
  Op& op = *added;
  op.peer = rank_;
  op.native = std::make_unique<NativeOp>();
  op.native->args = args;
  WireHeader mine = header;
  mine.sender_rank = static_cast<uint32_t>(rank_);  // check_wire_header() verifies it
  encode_wire_header(mine, op.native->mine.data());
  op.native->gathered.resize(static_cast<size_t>(size_) * kWireHeaderBytes);
  native_queue_.push_back(h);
  advance_natives();
  *handle = h;
  return Status::ok();
}

void MpiTransport::advance_natives() {
  while (!native_queue_.empty()) {
    if (book_.find_pending(native_queue_.front()) != nullptr) break;
    native_queue_.pop_front();
  }
  if (!failed_.is_ok() || closed_) return;
  for (Handle h : native_queue_) {
    Op* pending = book_.find_pending(h);
    if (pending == nullptr) continue;
    Op& op = *pending;
    NativeOp& native = *op.native;
    if (native.stage == NativeStage::kQueued && !native.args.identity_checked) {
      Status st = post_header_gather(h, op);
      if (!st.is_ok()) fail(st, true);
      return;  // later ops wait until this one's data collective is posted
    }
    if (native.stage == NativeStage::kGathering) return;
    if (native.stage == NativeStage::kRunning) continue;
    if (native.stage == NativeStage::kGathered) {
      Status st = check_gathered_headers(native);
      if (!st.is_ok()) {  // every rank found the same mismatch and posts no data collective
        op.done = true;
        op.status = st;
        continue;
      }
    }
    // Headers that checked out here, or an op the engine checked already: the data collective.
    Status st = post_native_collective(h, op);
    if (!st.is_ok()) {
      fail(st, true);
      return;
    }
  }
}

Status MpiTransport::post_header_gather(Handle handle, Op& op) {
  NativeOp& native = *op.native;
  MPI_Request request = MPI_REQUEST_NULL;
  const int n = static_cast<int>(kWireHeaderBytes);
  TG_RETURN_IF_ERROR(
      check_mpi(MPI_Iallgather(native.mine.data(), n, MPI_BYTE, native.gathered.data(), n, MPI_BYTE,
                               coll_comm_, &request),
                "MPI_Iallgather (native op headers)"));
  track(request, handle, Part::kNativeHeaders, false, kWireHeaderBytes);
  ++op.parts_left;
  native.stage = NativeStage::kGathering;
  return Status::ok();
}

// Rank 0's header against every other rank's, so that all ranks report the same first mismatch.
Status MpiTransport::check_gathered_headers(const NativeOp& native) const {
  const WireHeader reference = decode_wire_header(native.gathered.data());
  for (int r = 1; r < size_; ++r) {
    const WireHeader theirs =
        decode_wire_header(native.gathered.data() + static_cast<size_t>(r) * kWireHeaderBytes);
    Status st = check_wire_header(reference, theirs, 0, r);
    if (!st.is_ok()) {
      return Status(st.code(), st.message() + " [found by " + who_ +
                                   " in the mpi transport's native header exchange]");
    }
  }
  // Rank 0's own header checked too (magic, version), as received from itself.
  return check_wire_header(reference, reference, 0, 0);
}

Status MpiTransport::post_allreduce_chunks(Handle handle, Op& op) {
  const NativeCollectiveArgs& a = op.native->args;
  const bool in_place = a.input == a.output;
  for (int64_t offset = 0; offset < a.count; offset += native_max_elements_) {
    const int n = static_cast<int>(std::min(native_max_elements_, a.count - offset));
    char* out = byte_at(a.output, offset, a.dtype);
    const void* in = in_place ? MPI_IN_PLACE : byte_at(const_cast<void*>(a.input), offset, a.dtype);
    MPI_Request request = MPI_REQUEST_NULL;
    TG_RETURN_IF_ERROR(check_mpi(MPI_Iallreduce(in, out, n, mpi_type(a.dtype, a.kind),
                                                mpi_op(a.reduce_op), coll_comm_, &request),
                                 "MPI_Iallreduce"));
    track(request, handle, Part::kNativeData, false, 0);
    ++op.parts_left;
  }
  return Status::ok();
}

Status MpiTransport::post_native_collective(Handle handle, Op& op) {
  NativeOp& native = *op.native;
  const NativeCollectiveArgs& a = native.args;
  native.stage = NativeStage::kRunning;
  if (a.count == 0) {  // every rank agreed on 0 in the header check: nothing to move
    op.done = true;
    return Status::ok();
  }
  if (a.kind == NativeCollective::kAllreduce) return post_allreduce_chunks(handle, op);

  // allgather / reduce_scatter: one call, with a block type when the count exceeds an int.
  MPI_Datatype type = mpi_type(a.dtype, a.kind);
  int64_t k = 1;
  if (a.count > native_max_elements_) {
    k = block_elements(a.count, native_max_elements_);
    TG_RETURN_IF_ERROR(
        check_mpi(MPI_Type_contiguous(static_cast<int>(k), mpi_type(a.dtype, a.kind), &type),
                  "MPI_Type_contiguous"));
    TG_RETURN_IF_ERROR(check_mpi(MPI_Type_commit(&type), "MPI_Type_commit"));
  }
  const int n = static_cast<int>(a.count / k);
  void* in = const_cast<void*>(a.input);
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  if (a.kind == NativeCollective::kAllgather) {
    // MPI's in-place allgather takes this rank's block from its place in the output.
    const bool in_place = in == byte_at(a.output, rank_ * a.count, a.dtype);
    rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : in, n, type, a.output, n, type, coll_comm_,
                        &request);
  } else {
    // In place: the input is read from the output buffer and this rank's block lands at its start.
    rc = MPI_Ireduce_scatter_block(in == a.output ? MPI_IN_PLACE : in, a.output, n, type,
                                   mpi_op(a.reduce_op), coll_comm_, &request);
  }
  // Freeing a committed type is allowed while an operation that uses it is pending.
  if (k > 1) MPI_Type_free(&type);
  TG_RETURN_IF_ERROR(check_mpi(
      rc, a.kind == NativeCollective::kAllgather ? "MPI_Iallgather" : "MPI_Ireduce_scatter_block"));
  track(request, handle, Part::kNativeData, false, 0);
  ++op.parts_left;
  return Status::ok();
}

void MpiTransport::on_native_complete(const Slot& slot, Op& op, int mpi_error) {
  if (mpi_error != MPI_SUCCESS) {
    fail(check_mpi(mpi_error, who_ + ": native " + kind_name(op.native->args.kind)), true);
    return;
  }
  --op.parts_left;
  if (slot.part == Part::kNativeHeaders) {
    op.native->stage = NativeStage::kGathered;  // advance_natives() checks and posts the data
  } else if (op.parts_left == 0) {
    finish_native(op);
  }
}

// The data collective completed: AVG's division, then the op is done.
void MpiTransport::finish_native(Op& op) {
  const NativeCollectiveArgs& a = op.native->args;
  if (a.reduce_op == TIDEGATE_AVG && a.kind != NativeCollective::kAllgather) {
    finalize_average(a.output, a.count, a.dtype, size_);
  }
  op.done = true;
}

}  // namespace mpi
}  // namespace tidegate
