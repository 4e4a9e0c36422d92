// Host-side helpers of the launch_* functions (plain C++: launch_common.cc is compiled by the
// host compiler, the kernels' .cu files include this through device_common.cuh).
#pragma once

#include <cstdint>

namespace tidegate::cuda::detail {

// Grid size for `units` units of work of `per_block` units per block (at least 1, so that the
// prefix is written for n = 0), capped so that a grid-stride loop covers the rest.
int grid_for(int64_t units, int64_t per_block);

// Checks shared by every launch_*: n >= 0, pointers present, out and in 16-byte aligned.
const char* check_common(const uint8_t* out, const float* in, int64_t n, const int64_t* bad_index);
// Resets the verdict to "nothing refused" on stream (a cudaStream_t).
const char* reset_bad_index(int64_t* bad_index, void* stream);
// nullptr, or cudaGetErrorString of cudaGetLastError() after a launch.
const char* launch_status();

}  // namespace tidegate::cuda::detail
