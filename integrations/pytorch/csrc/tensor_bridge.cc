#include "tensor_bridge.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <string>

namespace tidegate_torch {

std::optional<tidegate_dtype_t> tidegate_dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return TIDEGATE_FLOAT32;
    case at::kDouble:
      return TIDEGATE_FLOAT64;
    case at::kHalf:
      return TIDEGATE_FLOAT16;
    case at::kBFloat16:
      return TIDEGATE_BFLOAT16;
    case at::kInt:
      return TIDEGATE_INT32;
    case at::kLong:
      return TIDEGATE_INT64;
    case at::kByte:
      return TIDEGATE_UINT8;
    default:
      return std::nullopt;
  }
}

WireType reduction_type(const at::Tensor& tensor, const char* collective) {
  const std::optional<tidegate_dtype_t> dtype = tidegate_dtype_of(tensor.scalar_type());
  TORCH_CHECK_TYPE(dtype.has_value(), "tidegate ", collective, " cannot reduce ",
                   tensor.scalar_type(),
                   " tensors: it reduces float32, float64, float16, bfloat16, int32, int64 and "
                   "uint8 (convert the tensor, e.g. .to(torch.int32), before the collective)");
  return WireType{*dtype, 1};
}

WireType movement_type(const at::Tensor& tensor) {
  const std::optional<tidegate_dtype_t> dtype = tidegate_dtype_of(tensor.scalar_type());
  // A known dtype keeps its name on the wire, so that ranks that disagree on it fail with a
  // MISMATCH instead of exchanging reinterpreted bytes.
  if (dtype.has_value()) return WireType{*dtype, 1};
  return WireType{TIDEGATE_UINT8, static_cast<int64_t>(tensor.element_size())};
}

tidegate_reduce_op_t reduce_op(const c10d::ReduceOp& op, const char* collective) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return TIDEGATE_SUM;
    case c10d::ReduceOp::AVG:
      return TIDEGATE_AVG;
    case c10d::ReduceOp::PRODUCT:
      return TIDEGATE_PROD;
    case c10d::ReduceOp::MIN:
      return TIDEGATE_MIN;
    case c10d::ReduceOp::MAX:
      return TIDEGATE_MAX;
    default:
      TORCH_CHECK_VALUE(false, "tidegate ", collective, " does not support the reduce op ",
                        static_cast<int>(op.op_),
                        ": it has SUM, AVG, PRODUCT, MIN and MAX (no bitwise ops, no PREMUL_SUM)");
  }
}

tidegate_tensor_t view(const at::Tensor& contiguous, WireType type) {
  TORCH_INTERNAL_ASSERT(contiguous.is_contiguous(), "tidegate views need contiguous tensors");
  tidegate_tensor_t t =
      tidegate_host_tensor(contiguous.data_ptr(), contiguous.numel() * type.scale, type.dtype);
  if (contiguous.is_cuda()) {
    t.memory = TIDEGATE_MEMORY_CUDA;
    // The stream the caller's work on this tensor is ordered on; found through c10's
    // device-generic interface, so this file needs no CUDA header.
    const c10::Device device = contiguous.device();
    t.stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device).native_handle();
  }
  return t;
}

std::vector<int64_t> wire_counts(const std::vector<at::Tensor>& tensors, WireType type) {
  std::vector<int64_t> counts;
  counts.reserve(tensors.size());
  for (const at::Tensor& t : tensors) counts.push_back(t.numel() * type.scale);
  return counts;
}

std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) offsets[i] = offsets[i - 1] + counts[i - 1];
  return offsets;
}

void check_tensor_list(const std::vector<at::Tensor>& tensors, size_t expected,
                       const char* collective, const char* role) {
  TORCH_CHECK_VALUE(tensors.size() == expected, "tidegate ", collective, " takes ", expected, " ",
                    role, " tensor(s) per call, got ", tensors.size(),
                    expected == 1 ? " (tidegate drives one device per process)" : "");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "tidegate ", collective,
                      " takes dense tensors, got a ", t.layout(), " ", role, " tensor");
    TORCH_CHECK_VALUE(t.device().type() == tensors.front().device().type(), "tidegate ", collective,
                      " takes ", role, " tensors on one device type, got ",
                      tensors.front().device(), " and ", t.device());
  }
}

void check_same_dtype_and_device(const at::Tensor& like, const std::vector<at::Tensor>& tensors,
                                 const char* collective) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == like.scalar_type(), "tidegate ", collective,
                     " needs tensors of one dtype, got ", like.scalar_type(), " and ",
                     t.scalar_type());
    TORCH_CHECK_VALUE(t.device() == like.device(), "tidegate ", collective,
                      " needs tensors on one device, got ", like.device(), " and ", t.device());
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "tidegate ", collective,
                      " takes dense tensors, got a ", t.layout(), " tensor");
  }
}

}  // namespace tidegate_torch
