#include "api/tensor_checks.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace tidegate {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 56;  // far beyond any memory; guards overflow
// The most bytes a host tensor may span: the user address space of a 64-bit Linux process
// (47 bits with 4-level page tables). A larger count describes no real memory; accepting it
// would have an algorithm cut it into billions of segments and spin on them instead of failing.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 47;

bool overlaps_partially(const TensorView& a, const TensorView& b) {
  if (a.data == b.data || a.count == 0 || b.count == 0) return false;
  const char* a0 = a.byte_data();
  const char* b0 = b.byte_data();
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// The int a C caller stored in an enum field, read without loading it as the enum.
template <class Enum>
int enum_as_int(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

// Whether `b` shares a byte with `a`; a zero-length `b` counts when its address lies inside `a`
// or at its end (the address, not the length, is the call's shape).
bool overlaps(const TensorView& a, const TensorView& b) {
  if (a.count == 0) return false;
  const char* a0 = a.byte_data();
  const char* b0 = b.byte_data();
  if (b.count == 0) return b0 >= a0 && b0 <= a0 + a.bytes();
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

Status check_same_dtype(const TensorView& input, const TensorView& output) {
  if (input.dtype != output.dtype) {
    return invalid_argument(std::string("input dtype ") + dtype_name(input.dtype) +
                            " differs from output dtype " + dtype_name(output.dtype));
  }
  return Status::ok();
}

Status check_op(tidegate_reduce_op_t op) {
  TG_CHECK_ARG(reduce_op_is_valid(op), "unknown reduce op " + std::to_string(static_cast<int>(op)));
  return Status::ok();
}

std::string count_text(const char* what, int64_t got, int64_t want) {
  return std::string(what) + " has count " + std::to_string(got) + " but must have " +
         std::to_string(want);
}

}  // namespace

Status check_tensor(const tidegate_tensor_t* tensor, const char* role, TensorView* view) {
  const std::string name(role);
  TG_CHECK_ARG(tensor != nullptr, name + " tensor pointer is NULL");
  TG_CHECK_ARG(tensor->count >= 0,
               name + " count is negative (" + std::to_string(tensor->count) + ")");
  TG_CHECK_ARG(tensor->count <= kMaxElements, name + " count is implausibly large");
  TG_CHECK_ARG(tensor->count == 0 || tensor->data != nullptr, name + " data is NULL but count > 0");
  // A C caller may store any int in an enum field; C++ may not load one outside the enum's
  // range (undefined behaviour, which UBSan reports), so the fields are read as ints first.
  const int raw_dtype = enum_as_int(tensor->dtype);
  const int raw_memory = enum_as_int(tensor->memory);
  TG_CHECK_ARG(dtype_is_valid(raw_dtype), name + " has unknown dtype " + std::to_string(raw_dtype));
  const uint64_t bytes = static_cast<uint64_t>(tensor->count) * dtype_size(tensor->dtype);
  const uintptr_t start = reinterpret_cast<uintptr_t>(tensor->data);
  TG_CHECK_ARG(bytes <= kMaxTensorBytes && start <= UINTPTR_MAX - bytes,
               name + " count " + std::to_string(tensor->count) + " x " +
                   std::to_string(dtype_size(tensor->dtype)) + " bytes cannot describe memory " +
                   "(over 128 TiB, or past the end of the address space): check the count");
  TG_CHECK_ARG(raw_memory == TIDEGATE_MEMORY_HOST || raw_memory == TIDEGATE_MEMORY_CUDA,
               name + " has unknown memory kind " + std::to_string(raw_memory));
  if (tensor->memory == TIDEGATE_MEMORY_CUDA) {
    return unsupported(name +
                       " is CUDA memory, but this build's transports move host memory "
                       "only; copy it to the host or use a CUDA-capable transport (NCCL)");
  }
  const bool has_shape = tensor->rows != 0 || tensor->cols != 0;
  if (has_shape) {
    TG_CHECK_ARG(
        tensor->rows > 0 && tensor->cols > 0 && tensor->rows <= kMaxElements / tensor->cols &&
            tensor->rows * tensor->cols == tensor->count,
        name + " shape " + std::to_string(tensor->rows) + "x" + std::to_string(tensor->cols) +
            " does not match count " + std::to_string(tensor->count));
  }
  view->data = tensor->data;
  view->count = tensor->count;
  view->dtype = tensor->dtype;
  view->memory = tensor->memory;
  view->stream = tensor->stream;
  view->rows = tensor->rows;
  view->cols = tensor->cols;
  return Status::ok();
}

Status copy_rank_array(const int64_t* values, int size, const char* role,
                       std::vector<int64_t>* out) {
  TG_CHECK_ARG(values != nullptr, std::string(role) + " array is NULL");
  out->assign(values, values + size);
  for (int r = 0; r < size; ++r) {
    TG_CHECK_ARG(values[r] >= 0 && values[r] <= kMaxElements,
                 std::string(role) + "[" + std::to_string(r) + "] = " + std::to_string(values[r]) +
                     " is invalid");
  }
  return Status::ok();
}

Status allreduce_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                      tidegate_reduce_op_t op, CollectiveArgs* args) {
  args->kind = OpKind::kAllreduce;
  TG_RETURN_IF_ERROR(check_op(op));
  TG_RETURN_IF_ERROR(check_tensor(input, "input", &args->input));
  TG_RETURN_IF_ERROR(check_tensor(output, "output", &args->output));
  TG_RETURN_IF_ERROR(check_same_dtype(args->input, args->output));
  TG_CHECK_ARG(args->input.count == args->output.count,
               count_text("output", args->output.count, args->input.count));
  TG_CHECK_ARG(!overlaps_partially(args->input, args->output),
               "input and output overlap without being the same memory");
  args->reduce_op = op;
  return Status::ok();
}

Status reduce_scatter_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                           tidegate_reduce_op_t op, int rank, int size, CollectiveArgs* args) {
  args->kind = OpKind::kReduceScatter;
  TG_RETURN_IF_ERROR(check_op(op));
  TG_RETURN_IF_ERROR(check_tensor(input, "input", &args->input));
  TG_RETURN_IF_ERROR(check_tensor(output, "output", &args->output));
  TG_RETURN_IF_ERROR(check_same_dtype(args->input, args->output));
  int64_t offset = 0;
  int64_t length = 0;
  block_range(args->input.count, size, rank, &offset, &length);
  TG_CHECK_ARG(args->output.count == length,
               count_text("output", args->output.count, length) + " (this rank's block of " +
                   std::to_string(args->input.count) + " elements; see tidegate_block_range)");
  // In place comes in two shapes, and on rank 0 they are the same call: the output at the
  // input's start (MPI_IN_PLACE) or at this rank's own block of it (NCCL). Both are accepted on
  // every rank, so that every rank gives one call shape the same verdict; any other overlap is
  // refused on every rank. A zero-length output counts by its address (see overlaps()).
  const char* own_block =
      args->input.byte_data() + offset * static_cast<int64_t>(args->input.element_size());
  const bool in_place = args->output.data == args->input.data || args->output.data == own_block;
  TG_CHECK_ARG(in_place || !overlaps(args->input, args->output),
               "reduce_scatter output overlaps the input without being in place: the output "
               "must be separate memory, the input's start, or this rank's own block of the "
               "input (tidegate_block_range)");
  args->reduce_op = op;
  return Status::ok();
}

Status allgather_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output, int size,
                      CollectiveArgs* args) {
  args->kind = OpKind::kAllgather;
  TG_RETURN_IF_ERROR(check_tensor(input, "input", &args->input));
  TG_RETURN_IF_ERROR(check_tensor(output, "output", &args->output));
  TG_RETURN_IF_ERROR(check_same_dtype(args->input, args->output));
  TG_CHECK_ARG(
      args->output.count == args->input.count * size,
      count_text("output", args->output.count, args->input.count * size) + " (size x input count)");
  return Status::ok();
}

Status allgatherv_args(const tidegate_tensor_t* input, const tidegate_tensor_t* output,
                       const int64_t* counts, int rank, int size, CollectiveArgs* args) {
  args->kind = OpKind::kAllgatherv;
  TG_RETURN_IF_ERROR(check_tensor(input, "input", &args->input));
  TG_RETURN_IF_ERROR(check_tensor(output, "output", &args->output));
  TG_RETURN_IF_ERROR(check_same_dtype(args->input, args->output));
  TG_RETURN_IF_ERROR(copy_rank_array(counts, size, "counts", &args->counts));
  int64_t total = 0;
  for (int64_t c : args->counts) total += c;
  TG_CHECK_ARG(args->input.count == args->counts[rank],
               count_text("input", args->input.count, args->counts[rank]) + " (counts[rank])");
  TG_CHECK_ARG(args->output.count == total,
               count_text("output", args->output.count, total) + " (sum of counts)");
  return Status::ok();
}

Status broadcast_args(const tidegate_tensor_t* tensor, int root, int size, CollectiveArgs* args) {
  args->kind = OpKind::kBroadcast;
  TG_CHECK_ARG(root >= 0 && root < size, "broadcast root " + std::to_string(root) +
                                             " is outside [0, " + std::to_string(size) + ")");
  TG_RETURN_IF_ERROR(check_tensor(tensor, "tensor", &args->output));
  args->input = args->output;
  args->root = root;
  return Status::ok();
}

Status alltoallv_args(const tidegate_tensor_t* input, const int64_t* send_counts,
                      const int64_t* send_offsets, const tidegate_tensor_t* output,
                      const int64_t* recv_counts, const int64_t* recv_offsets, int size,
                      CollectiveArgs* args) {
  args->kind = OpKind::kAlltoallv;
  TG_RETURN_IF_ERROR(check_tensor(input, "input", &args->input));
  TG_RETURN_IF_ERROR(check_tensor(output, "output", &args->output));
  TG_RETURN_IF_ERROR(check_same_dtype(args->input, args->output));
  TG_RETURN_IF_ERROR(copy_rank_array(send_counts, size, "send_counts", &args->send_counts));
  TG_RETURN_IF_ERROR(copy_rank_array(send_offsets, size, "send_offsets", &args->send_offsets));
  TG_RETURN_IF_ERROR(copy_rank_array(recv_counts, size, "recv_counts", &args->recv_counts));
  TG_RETURN_IF_ERROR(copy_rank_array(recv_offsets, size, "recv_offsets", &args->recv_offsets));
  for (int p = 0; p < size; ++p) {
    TG_CHECK_ARG(args->send_offsets[p] + args->send_counts[p] <= args->input.count,
                 "send block for rank " + std::to_string(p) + " runs past the input tensor");
    TG_CHECK_ARG(args->recv_offsets[p] + args->recv_counts[p] <= args->output.count,
                 "receive block for rank " + std::to_string(p) + " runs past the output tensor");
  }
  const bool empty = args->input.count == 0 || args->output.count == 0;
  TG_CHECK_ARG(empty || (!overlaps_partially(args->input, args->output) &&
                         args->input.data != args->output.data),
               "alltoallv needs separate input and output memory");
  return Status::ok();
}

}  // namespace tidegate
