// ProcessGroupTidegate's data movement: broadcast, allgather (list, tensor and coalesced forms),
// gather and scatter. Tensors of any dtype move (as bytes when tidegate has no name for it).
#include "backend.h"
#include "staging.h"
#include "tensor_bridge.h"

namespace tidegate_torch {

namespace {

void check_root(int64_t root, int size, const char* collective) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "tidegate ", collective, ": root ", root,
                    " is outside [0, ", size, ")");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  static constexpr const char* kName = "broadcast";
  check_tensor_list(tensors, 1, kName, "in-place");
  check_root(opts.rootRank, size_, kName);
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "tidegate ", kName, ": rootTensor must be 0");
  const int root = static_cast<int>(opts.rootRank);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::BROADCAST, kName, tensors, tensors);
  const tidegate_tensor_t data =
      view(in_place_buffer(*work, tensors[0]), movement_type(tensors[0]));
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ibroadcast(comm, &data, root, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  static constexpr const char* kName = "allgather";
  check_tensor_list(inputs, 1, kName, "input");
  TORCH_CHECK_VALUE(outputs.size() == 1, "tidegate ", kName,
                    " takes one list of output tensors per call, got ", outputs.size());
  check_tensor_list(outputs[0], static_cast<size_t>(size_), kName, "output");
  check_same_dtype_and_device(inputs[0], outputs[0], kName);
  const at::Tensor& input = inputs[0];
  TORCH_CHECK_VALUE(outputs[0][rank_].numel() == input.numel(), "tidegate ", kName,
                    ": this rank's output tensor has ", outputs[0][rank_].numel(),
                    " elements but the input has ", input.numel());
  const WireType type = movement_type(input);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLGATHER, kName, outputs[0], inputs);
  const std::vector<int64_t> counts = wire_counts(outputs[0], type);
  const at::Tensor flat = flat_buffer(*work, input, total_numel(outputs[0]));
  copy_back_slices(*work, flat, 0, outputs[0]);
  const tidegate_tensor_t in = view(input_buffer(*work, input), type);
  const tidegate_tensor_t out = view(flat, type);
  const bool equal =
      std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts.front(); });
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    // Outputs of different sizes (an uneven allgather) take the per-rank-count variant.
    return equal ? tidegate_iallgather(comm, &in, &out, request)
                 : tidegate_iallgatherv(comm, &in, &out, counts.data(), request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  static constexpr const char* kName = "all_gather_into_tensor";
  check_same_dtype_and_device(output, {input}, kName);
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "tidegate ", kName,
                    " needs an output of group size x input elements (", size_, " x ",
                    input.numel(), "), got ", output.numel());
  const WireType type = movement_type(input);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::_ALLGATHER_BASE, kName,
                                                std::vector<at::Tensor>{output},
                                                std::vector<at::Tensor>{input});
  const tidegate_tensor_t in = view(input_buffer(*work, input), type);
  const tidegate_tensor_t out = view(output_buffer(*work, output), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_iallgather(comm, &in, &out, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  static constexpr const char* kName = "allgather_coalesced";
  TORCH_CHECK_VALUE(!inputs.empty(), "tidegate ", kName, " needs at least one input tensor");
  check_same_dtype_and_device(inputs[0], inputs, kName);
  TORCH_CHECK_VALUE(outputs.size() == static_cast<size_t>(size_), "tidegate ", kName,
                    " needs one output list per rank (", size_, "), got ", outputs.size());
  std::vector<at::Tensor> all_outputs;
  for (const std::vector<at::Tensor>& from_rank : outputs) {
    TORCH_CHECK_VALUE(from_rank.size() == inputs.size(), "tidegate ", kName,
                      " needs each output list as long as the input list (", inputs.size(),
                      "), got ", from_rank.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK_VALUE(from_rank[i].numel() == inputs[i].numel(), "tidegate ", kName, ": output ",
                        i, " has ", from_rank[i].numel(), " elements, input ", i, " has ",
                        inputs[i].numel());
    }
    all_outputs.insert(all_outputs.end(), from_rank.begin(), from_rank.end());
  }
  check_same_dtype_and_device(inputs[0], all_outputs, kName);
  const WireType type = movement_type(inputs[0]);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::ALLGATHER_COALESCED, kName,
                                                all_outputs, inputs);
  // Each rank's inputs laid end to end make its block; rank r's block lands in outputs[r].
  const at::Tensor flat = flat_buffer(*work, inputs[0], total_numel(all_outputs));
  copy_back_slices(*work, flat, 0, all_outputs);
  const tidegate_tensor_t in = view(concatenated(*work, inputs), type);
  const tidegate_tensor_t out = view(flat, type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_iallgather(comm, &in, &out, request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  static constexpr const char* kName = "gather";
  check_tensor_list(inputs, 1, kName, "input");
  check_root(opts.rootRank, size_, kName);
  const bool is_root = rank_ == opts.rootRank;
  const std::vector<at::Tensor> none;
  TORCH_CHECK_VALUE(outputs.size() == (is_root ? 1u : 0u), "tidegate ", kName, ": ",
                    is_root ? "the root needs one list of output tensors"
                            : "only the root passes output tensors");
  const std::vector<at::Tensor>& received = is_root ? outputs[0] : none;
  if (is_root) {
    check_tensor_list(received, static_cast<size_t>(size_), kName, "output");
    check_same_dtype_and_device(inputs[0], received, kName);
  }
  const WireType type = movement_type(inputs[0]);
  auto work =
      c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::GATHER, kName, received, inputs);
  // An all-to-all in which every rank sends only to the root.
  std::vector<int64_t> send_counts(size_, 0), recv_counts(size_, 0);
  send_counts[opts.rootRank] = inputs[0].numel() * type.scale;
  if (is_root) recv_counts = wire_counts(received, type);
  const std::vector<int64_t> send_offsets(size_, 0), recv_offsets = prefix_offsets(recv_counts);
  const at::Tensor flat = flat_buffer(*work, inputs[0], total_numel(received));
  copy_back_slices(*work, flat, 0, received);
  const tidegate_tensor_t in = view(input_buffer(*work, inputs[0]), type);
  const tidegate_tensor_t out = view(flat, type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ialltoallv(comm, &in, send_counts.data(), send_offsets.data(), &out,
                               recv_counts.data(), recv_offsets.data(), request);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTidegate::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  static constexpr const char* kName = "scatter";
  check_tensor_list(outputs, 1, kName, "output");
  check_root(opts.rootRank, size_, kName);
  const bool is_root = rank_ == opts.rootRank;
  const std::vector<at::Tensor> none;
  TORCH_CHECK_VALUE(
      inputs.size() == (is_root ? 1u : 0u), "tidegate ", kName, ": ",
      is_root ? "the root needs one list of input tensors" : "only the root passes input tensors");
  const std::vector<at::Tensor>& sent = is_root ? inputs[0] : none;
  if (is_root) {
    check_tensor_list(sent, static_cast<size_t>(size_), kName, "input");
    check_same_dtype_and_device(outputs[0], sent, kName);
  }
  const WireType type = movement_type(outputs[0]);
  auto work = c10::make_intrusive<TidegateWork>(rank_, c10d::OpType::SCATTER, kName, outputs, sent);
  // An all-to-all in which only the root sends.
  std::vector<int64_t> send_counts(size_, 0), recv_counts(size_, 0);
  if (is_root) send_counts = wire_counts(sent, type);
  recv_counts[opts.rootRank] = outputs[0].numel() * type.scale;
  const std::vector<int64_t> send_offsets = prefix_offsets(send_counts), recv_offsets(size_, 0);
  const at::Tensor flat_in =
      is_root ? concatenated(*work, sent) : flat_buffer(*work, outputs[0], 0);
  const tidegate_tensor_t in = view(flat_in, type);
  const tidegate_tensor_t out = view(output_buffer(*work, outputs[0]), type);
  return launch(work, [&](tidegate_comm_t comm, tidegate_request_t* request) {
    return tidegate_ialltoallv(comm, &in, send_counts.data(), send_offsets.data(), &out,
                               recv_counts.data(), recv_offsets.data(), request);
  });
}

}  // namespace tidegate_torch
