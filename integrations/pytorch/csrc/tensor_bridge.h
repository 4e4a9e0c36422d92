// From torch's terms to tidegate's: dtypes, reduce ops and views of tensor memory.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <vector>

#include "tidegate/tidegate.h"

namespace tidegate_torch {

// tidegate's dtype for a torch dtype, or nullopt when tidegate has none.
std::optional<tidegate_dtype_t> tidegate_dtype_of(at::ScalarType type);

// How a tensor travels: as `dtype`, `scale` wire elements per tensor element. Reductions need a
// dtype tidegate knows (scale 1); data movement of any other dtype (bool, int8, complex, ...)
// travels as its bytes (UINT8, scale = element size).
struct WireType {
  tidegate_dtype_t dtype = TIDEGATE_UINT8;
  int64_t scale = 1;
};

// The wire type for a reduction; TypeError naming the dtype when tidegate cannot reduce it.
WireType reduction_type(const at::Tensor& tensor, const char* collective);

// The wire type for data movement (allgather, broadcast, alltoall, ...): never fails.
WireType movement_type(const at::Tensor& tensor);

// tidegate's reduce op; ValueError for the ops it does not have (BAND, BOR, BXOR, PREMUL_SUM).
tidegate_reduce_op_t reduce_op(const c10d::ReduceOp& op, const char* collective);

// A view of a contiguous tensor's memory as numel * type.scale elements. CUDA tensors are
// ordered on the current stream of their device.
tidegate_tensor_t view(const at::Tensor& contiguous, WireType type);

// Element counts on the wire of each tensor.
std::vector<int64_t> wire_counts(const std::vector<at::Tensor>& tensors, WireType type);

// Offsets of consecutive blocks of the given lengths (0, c0, c0 + c1, ...).
std::vector<int64_t> prefix_offsets(const std::vector<int64_t>& counts);

// Checks shared by every collective: `tensors` has exactly `expected` entries and all of them
// are dense (not sparse) and live on the device type of the first one. ValueError otherwise.
void check_tensor_list(const std::vector<at::Tensor>& tensors, size_t expected,
                       const char* collective, const char* role);

// Checks that every tensor of `tensors` has `like`'s dtype and device; TypeError otherwise.
void check_same_dtype_and_device(const at::Tensor& like, const std::vector<at::Tensor>& tensors,
                                 const char* collective);

}  // namespace tidegate_torch
