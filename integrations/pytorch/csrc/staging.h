// Buffers tidegate can read and write in place, made from the caller's tensors. A contiguous
// tensor is used as it is; anything else gets a contiguous copy (inputs) or a contiguous buffer
// that the Work copies back into the caller's tensor on success (outputs). Every buffer is kept
// alive by the Work until the collective finishes.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "work.h"

namespace tidegate_torch {

// A buffer tidegate only reads: `tensor` itself when contiguous, else a contiguous copy.
at::Tensor input_buffer(TidegateWork& work, const at::Tensor& tensor);

// A buffer tidegate only writes, copied back into `tensor` on success when it is not `tensor`.
at::Tensor output_buffer(TidegateWork& work, const at::Tensor& tensor);

// A buffer tidegate reads and writes (in place), copied back when it is not `tensor`.
at::Tensor in_place_buffer(TidegateWork& work, const at::Tensor& tensor);

// A private copy tidegate may overwrite, never copied back (reduce's non-root ranks).
at::Tensor scratch_copy(TidegateWork& work, const at::Tensor& tensor);

// One 1-D buffer holding `tensors` one after the other (they share dtype and device).
at::Tensor concatenated(TidegateWork& work, const std::vector<at::Tensor>& tensors);

// A new 1-D buffer of `numel` elements like `like` (dtype and device).
at::Tensor flat_buffer(TidegateWork& work, const at::Tensor& like, int64_t numel);

// On success, copies consecutive slices of the 1-D `flat`, starting at element `offset`, into
// `tensors` (each slice as long as its tensor). Returns the offset after the last slice.
int64_t copy_back_slices(TidegateWork& work, const at::Tensor& flat, int64_t offset,
                         const std::vector<at::Tensor>& tensors);

// Sum of the tensors' element counts.
int64_t total_numel(const std::vector<at::Tensor>& tensors);

}  // namespace tidegate_torch
