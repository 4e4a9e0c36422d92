// ProcessGroupTidegate's reductions: allreduce, allreduce_coalesced, reduce, reduce_scatter.
#include "backend.h"
#include "staging.h"
#include "tensor_bridge.h"

namespace tidegate_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  static constexpr const char* kName = "allreduce";
  check_tensor_list(tensors, 1, kName, "in-place");
  TORCH_CHECK_VALUE(!opts.sparseIndices.has_value(), "tidegate ", kName,
                    " takes dense tensors (sparse allreduce is not supported)");
  const WireType type = reduction_type(tensors[0], kName);
  const tidegate_reduce_op_t op = reduce_op(opts.reduceOp, kName);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLREDUCE, kName, tensors, tensors);
  const tidegate_tensor_t data = view(in_place_buffer(*work, tensors[0]), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_iallreduce(comm, &data, &data, op, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  static constexpr const char* kName = "allreduce_coalesced";
  TORCH_CHECK_VALUE(!tensors.empty(), "tidegate ", kName, " needs at least one tensor");
  check_same_dtype_and_device(tensors[0], tensors, kName);
  const WireType type = reduction_type(tensors[0], kName);
  const tidegate_reduce_op_t op = reduce_op(opts.reduceOp, kName);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLREDUCE_COALESCED, kName,
                                                tensors, tensors);
  // One collective over the tensors laid end to end, then each gets its slice back.
  const at::Tensor flat = concatenated(*work, tensors);
  copy_back_slices(*work, flat, 0, tensors);
  const tidegate_tensor_t data = view(flat, type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_iallreduce(comm, &data, &data, op, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  static constexpr const char* kName = "reduce";
  check_tensor_list(tensors, 1, kName, "in-place");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "tidegate ", kName, ": root ",
                    opts.rootRank, " is outside [0, ", size_, ")");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "tidegate ", kName, ": rootTensor must be 0");
  const WireType type = reduction_type(tensors[0], kName);
  const tidegate_reduce_op_t op = reduce_op(opts.reduceOp, kName);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::REDUCE, kName, tensors, tensors);
  // tidegate has no rooted reduce: an allreduce, whose result only the root keeps (the other
  // ranks reduce into a private copy, so their tensors are left as they were).
  const at::Tensor buffer =
      rank_ == opts.rootRank ? in_place_buffer(*work, tensors[0]) : scratch_copy(*work, tensors[0]);
  const tidegate_tensor_t data = view(buffer, type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_iallreduce(comm, &data, &data, op, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kName = "reduce_scatter";
  check_tensor_list(outputs, 1, kName, "output");
  TORCH_CHECK_VALUE(inputs.size() == 1, "tidegate ", kName,
                    " takes one list of input tensors per call, got ", inputs.size());
  check_tensor_list(inputs[0], static_cast<size_t>(size_), kName, "input");
  check_same_dtype_and_device(outputs[0], inputs[0], kName);
  for (const at::Tensor& in : inputs[0]) {
    TORCH_CHECK_VALUE(in.numel() == outputs[0].numel(), "tidegate ", kName,
                      " needs every input as large as the output (", outputs[0].numel(),
                      " elements), got one of ", in.numel());
  }
  const WireType type = reduction_type(outputs[0], kName);
  const tidegate_reduce_op_t op = reduce_op(opts.reduceOp, kName);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::REDUCE_SCATTER, kName, outputs,
                                                inputs[0]);
  // Rank r's block of the inputs laid end to end is inputs[r]: tidegate's blocks are equal
  // when the length divides by the group size, as it does here.
  const tidegate_tensor_t in = view(concatenated(*work, inputs[0]), type);
  const tidegate_tensor_t out = view(output_buffer(*work, outputs[0]), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ireduce_scatter(comm, &in, &out, op, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  static constexpr const char* kName = "reduce_scatter_tensor";
  check_same_dtype_and_device(output, {input}, kName);
  TORCH_CHECK_VALUE(input.numel() == output.numel() * size_, "tidegate ", kName,
                    " needs an input of group size x output elements (", size_, " x ",
                    output.numel(), "), got ", input.numel());
  const WireType type = reduction_type(output, kName);
  const tidegate_reduce_op_t op = reduce_op(opts.reduceOp, kName);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, kName,
                                                std::vector<at::Tensor>{output},
                                                std::vector<at::Tensor>{input});
  const tidegate_tensor_t in = view(input_buffer(*work, input), type);
  const tidegate_tensor_t out = view(output_buffer(*work, output), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ireduce_scatter(comm, &in, &out, op, request);
  });
}

}  // namespace tidegate_torch
