// ProcessGroupTidegate's all-to-all, barrier, and the point-to-point calls it refuses.
#include <algorithm>
#include <numeric>

#include "backend.h"
#include "staging.h"
#include "tensor_bridge.h"

namespace tidegate_torch {

namespace {

// Rows (dim-0 slices) per peer as element counts on the wire: the given split sizes, or equal
// splits when none are given (c10d's convention).
std::vector<int64_t> split_counts(const at::Tensor& tensor, const std::vector<int64_t>& splits,
                                  int size, WireType type, const char* role) {
  TORCH_CHECK_VALUE(tensor.dim() >= 1, "tidegate all_to_all_single needs ", role,
                    " tensors of at least one dimension");
  const int64_t rows = tensor.size(0);
  const int64_t row_elements = rows == 0 ? 0 : tensor.numel() / rows;
  std::vector<int64_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "tidegate all_to_all_single: the ", role, " tensor's ",
                      rows, " rows do not split evenly over ", size, " ranks; pass split sizes");
    std::fill(counts.begin(), counts.end(), rows / size * row_elements * type.scale);
    return counts;
  }
  TORCH_CHECK_VALUE(splits.size() == static_cast<size_t>(size),
                    "tidegate all_to_all_single: ", role, " split sizes need one entry per rank (",
                    size, "), got ", splits.size());
  TORCH_CHECK_VALUE(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows,
                    "tidegate all_to_all_single: ", role, " split sizes do not add up to the ",
                    role, " tensor's ", rows, " rows");
  for (int p = 0; p < size; ++p) counts[p] = splits[p] * row_elements * type.scale;
  return counts;
}

[[noreturn]] void refuse_point_to_point(const char* call) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "tidegate has no point-to-point operations: its C API offers collectives only, so ",
      call,
      " (and send/recv, isend/irecv, batch_isend_irecv) cannot run on backend 'tidegate'. Use a "
      "collective, or a gloo group for point-to-point: dist.new_group(backend='gloo')");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& /*opts*/) {
  static constexpr const char* kName = "all_to_all_single";
  check_same_dtype_and_device(output, {input}, kName);
  const WireType type = movement_type(input);
  const std::vector<int64_t> send_counts =
      split_counts(input, input_split_sizes, size_, type, "input");
  const std::vector<int64_t> recv_counts =
      split_counts(output, output_split_sizes, size_, type, "output");
  const std::vector<int64_t> send_offsets = prefix_offsets(send_counts);
  const std::vector<int64_t> recv_offsets = prefix_offsets(recv_counts);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLTOALL_BASE, kName,
                                                std::vector<at::Tensor>{output},
                                                std::vector<at::Tensor>{input});
  const tidegate_tensor_t in = view(input_buffer(*work, input), type);
  const tidegate_tensor_t out = view(output_buffer(*work, output), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ialltoallv(comm, &in, send_counts.data(), send_offsets.data(), &out,
                               recv_counts.data(), recv_offsets.data(), request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& /*opts*/) {
  static constexpr const char* kName = "all_to_all";
  check_tensor_list(inputs, static_cast<size_t>(size_), kName, "input");
  check_tensor_list(outputs, static_cast<size_t>(size_), kName, "output");
  check_same_dtype_and_device(inputs[0], inputs, kName);
  check_same_dtype_and_device(inputs[0], outputs, kName);
  const WireType type = movement_type(inputs[0]);
  const std::vector<int64_t> send_counts = wire_counts(inputs, type);
  const std::vector<int64_t> recv_counts = wire_counts(outputs, type);
  const std::vector<int64_t> send_offsets = prefix_offsets(send_counts);
  const std::vector<int64_t> recv_offsets = prefix_offsets(recv_counts);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLTOALL, kName, outputs, inputs);
  const at::Tensor flat_out = flat_buffer(*work, outputs[0], total_numel(outputs));
  copy_back_slices(*work, flat_out, 0, outputs);
  const tidegate_tensor_t in = view(concatenated(*work, inputs), type);
  const tidegate_tensor_t out = view(flat_out, type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ialltoallv(comm, &in, send_counts.data(), send_offsets.data(), &out,
                               recv_counts.data(), recv_offsets.data(), request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::barrier(const c10d::BarrierOptions& /*opts*/) {
  static constexpr const char* kName = "barrier";
  auto work = c10::make_intrusive<TidegateWork>(
      rank_, c10d::OpType::BARRIER, kName, std::vector<at::Tensor>{}, std::vector<at::Tensor>{});
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ibarrier(comm, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::send(std::vector<at::Tensor>& /*tensors*/,
                                                          int /*dst_rank*/, int /*tag*/) {
  refuse_point_to_point("send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::recv(std::vector<at::Tensor>& /*tensors*/,
                                                          int /*src_rank*/, int /*tag*/) {
  refuse_point_to_point("recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::recvAnysource(
    std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  refuse_point_to_point("recv from any source");
}

}  // namespace tidegate_torch
