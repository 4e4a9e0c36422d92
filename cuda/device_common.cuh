// Device helpers shared by the encoder kernels: the payload prefix, the non-finite verdict,
// the counter-based random stream of compress/stochastic.h, and launch sizing.
//
// Exactness rule: every float operation that defines payload bytes is written with an
// explicitly rounded intrinsic (__fadd_rn, __fmul_rn, __fdiv_rn, __dadd_rn, ...). nvcc would
// otherwise contract a*b + c into an FMA, which rounds once instead of twice and so gives other
// bytes than the CPU codecs (built with -ffp-contract=off). Denormals are kept (no -ftz).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/launch_common.h"
#include "cuda/payload_prefix.h"

namespace tidegate::cuda::detail {

inline constexpr int kThreads = 256;  // threads per block of every encoder kernel

// Block 0 writes the prefix words; out is 16-byte aligned, so they are aligned 8-byte stores.
__device__ __forceinline__ void write_prefix(uint8_t* out, const PayloadPrefix& prefix) {
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < prefix.words) {
    reinterpret_cast<uint64_t*>(out)[threadIdx.x] = prefix.word[threadIdx.x];
  }
}

// Lowers the verdict to `index` (the element the CPU codec would name in its refusal).
__device__ __forceinline__ void report_bad(int64_t* bad_index, int64_t index) {
  atomicMin(reinterpret_cast<long long*>(bad_index), static_cast<long long>(index));
}

__device__ __forceinline__ bool is_nonfinite(float x) {
  return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u;
}

// compress/stochastic.h, evaluated on the device.
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ uint32_t stream_key(uint64_t seed, uint64_t segment) {
  return static_cast<uint32_t>(splitmix64(seed ^ splitmix64(segment)) >> 32);
}
__device__ __forceinline__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
// uniform01(mix32(uint32(i) ^ key)): 24 random bits, exact in float.
__device__ __forceinline__ float uniform01(uint32_t counter, uint32_t key) {
  return __fmul_rn(__int2float_rn(static_cast<int>(mix32(counter ^ key) >> 8)), 0x1p-24f);
}

// Shuffles inside a group of four consecutive lanes (one bucket's threads). The mask names
// only the group, because the groups of a warp run different numbers of iterations.
__device__ __forceinline__ unsigned quad_mask() { return 0xfu << (threadIdx.x & 28u); }

}  // namespace tidegate::cuda::detail
