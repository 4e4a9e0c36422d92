// Element-wise encoders: fp16, bf16 (one 16-bit float per element) and the sign codecs
// signsgd and efsign (one bit per element, x < 0). Their payloads have no per-bucket scales,
// so they need only one read of the input; efsign adds a per-block sum of |x| in the CPU's lane
// order and a last one-block kernel that adds the block sums in block order.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_common.cuh"
#include "cuda/launch.h"

namespace tidegate::cuda {

namespace {

using detail::kThreads;

// collectives/half.h float_to_half: round to nearest even, subnormals by an exact-aligning
// float addition, overflow to infinity, NaN quieted.
__device__ __forceinline__ uint32_t to_fp16(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  const uint32_t rebiased = magnitude - 0x38000000u;
  const uint32_t normal = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
  const uint32_t subnormal =
      __float_as_uint(__fadd_rn(__uint_as_float(magnitude), 0.5f)) - 0x3f000000u;
  const uint32_t result = magnitude > 0x7f800000u    ? nan
                          : magnitude >= 0x47800000u ? 0x7c00u
                          : magnitude >= 0x38800000u ? normal
                                                     : subnormal;
  return sign | result;
}

// collectives/half.h float_to_bf16.
__device__ __forceinline__ uint32_t to_bf16(float f) {
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
  return ((x + 0x7fffu + ((x >> 16) & 1u)) >> 16) & 0xffffu;
}

template <bool kBf16>
__device__ __forceinline__ uint32_t to_16(float f, bool* bad) {
  const uint32_t h = kBf16 ? to_bf16(f) : to_fp16(f);
  *bad = (h & 0x7fffu) >= (kBf16 ? 0x7f80u : 0x7c00u);  // the CPU refuses infinite or NaN results
  return h;
}

// One float4 -> four 16-bit values (one 8-byte store) per thread, grid-stride; the n % 4 last
// elements by the first threads of the grid.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads)
    half_kernel(uint8_t* __restrict__ out, const float* __restrict__ in, int64_t n,
                PayloadPrefix prefix, int64_t* bad_index) {
  detail::write_prefix(out, prefix);
  uint16_t* body = reinterpret_cast<uint16_t*>(out + 16);
  const int64_t groups = n / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t g = thread; g < groups; g += stride) {
    const float4 v = reinterpret_cast<const float4*>(in)[g];
    bool bad[4];
    const uint32_t h0 = to_16<kBf16>(v.x, &bad[0]), h1 = to_16<kBf16>(v.y, &bad[1]);
    const uint32_t h2 = to_16<kBf16>(v.z, &bad[2]), h3 = to_16<kBf16>(v.w, &bad[3]);
    reinterpret_cast<uint2*>(body)[g] = make_uint2(h0 | (h1 << 16), h2 | (h3 << 16));
    if (bad[0] | bad[1] | bad[2] | bad[3]) {
      const int first = bad[0] ? 0 : bad[1] ? 1 : bad[2] ? 2 : 3;
      detail::report_bad(bad_index, 4 * g + first);
    }
  }
  if (thread < n - 4 * groups) {
    const int64_t i = 4 * groups + thread;
    bool bad = false;
    body[i] = static_cast<uint16_t>(to_16<kBf16>(in[i], &bad));
    if (bad) detail::report_bad(bad_index, i);
  }
}

// Sign bits of blocks of `block` elements (a multiple of 16), four threads per block: thread q
// of a group loads elements 4q..4q+3 of each 16 (one float4), so that, as in the CPU's
// lane_reduce.h, lane l = 4q + j accumulates the elements i with i % 16 == l in index order.
// With kSums each block's sum of |x| is then combined in lane order 0..15 into block_sums[b].
// Bits: the four nibbles of a 16-element group are OR-ed together by shuffles and thread 0
// stores them as one little-endian u16 (the LSB-first layout of bitpack.h).
template <bool kSums>
__global__ void __launch_bounds__(kThreads)
    sign_kernel(uint8_t* __restrict__ out, const float* __restrict__ in, int64_t n, int64_t block,
                double* __restrict__ block_sums, PayloadPrefix prefix, int64_t* bad_index) {
  detail::write_prefix(out, prefix);
  uint8_t* bits = out + 24;
  const int q = threadIdx.x & 3;
  const unsigned mask = detail::quad_mask();
  const int64_t quads = (static_cast<int64_t>(gridDim.x) * blockDim.x) / 4;
  const int64_t blocks = (n + block - 1) / block;
  const int64_t limit = (n + 7) / 8;  // packed_bytes(n, 1)
  for (int64_t b = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 4; b < blocks;
       b += quads) {
    const int64_t first = b * block;
    const int64_t m = min(block, n - first);
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t first_bad = INT64_MAX;
#pragma unroll 4
    for (int64_t i = 0; i < m; i += 16) {
      const int64_t e = first + i + 4 * q;
      float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // zeros past the end: no bit, adds +0 to a sum >= +0
      if (e + 4 <= n) {
        const float4 v = *reinterpret_cast<const float4*>(in + e);
        x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
      } else {
        for (int j = 0; j < 4; ++j) x[j] = e + j < n ? in[e + j] : 0.0f;
      }
      unsigned nibble = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        nibble |= (x[j] < 0.0f ? 1u : 0u) << j;
        if (kSums) acc[j] = __dadd_rn(acc[j], static_cast<double>(fabsf(x[j])));
        if (detail::is_nonfinite(x[j]) && first_bad == INT64_MAX) first_bad = e + j;
      }
      unsigned v = nibble << (4 * q);
      v |= __shfl_xor_sync(mask, v, 1, 4);
      v |= __shfl_xor_sync(mask, v, 2, 4);
      if (q == 0) {
        const int64_t byte = (first + i) / 8;  // even: blocks and groups start at multiples of 16
        if (i + 16 <= m) {
          *reinterpret_cast<uint16_t*>(bits + byte) = static_cast<uint16_t>(v);
        } else {
          bits[byte] = static_cast<uint8_t>(v);
          if (byte + 1 < limit) bits[byte + 1] = static_cast<uint8_t>(v >> 8);
        }
      }
    }
    if (first_bad != INT64_MAX) detail::report_bad(bad_index, first_bad);
    if (kSums) {
      double sum = 0.0;
      for (int source = 0; source < 4; ++source) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sum = __dadd_rn(sum, __shfl_sync(mask, acc[j], source, 4));
      }
      if (q == 0) block_sums[b] = sum;
    }
  }
}

// efsign's scale: the block sums added in block order (a sequential chain, as on the CPU),
// staged through shared memory so that the loads overlap; then divided by n.
__global__ void __launch_bounds__(kThreads)
    efsign_scale_kernel(uint8_t* out, const double* __restrict__ block_sums, int64_t blocks,
                        int64_t n) {
  __shared__ double stage[kThreads];
  double sum = 0.0;
  for (int64_t base = 0; base < blocks; base += kThreads) {
    const int64_t k = base + threadIdx.x;
    stage[threadIdx.x] = k < blocks ? block_sums[k] : 0.0;
    __syncthreads();
    if (threadIdx.x == 0) {
      const int64_t end = min(static_cast<int64_t>(kThreads), blocks - base);
      for (int64_t j = 0; j < end; ++j) sum = __dadd_rn(sum, stage[j]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float scale = n > 0 ? __double2float_rn(__ddiv_rn(sum, __ll2double_rn(n))) : 0.0f;
    reinterpret_cast<float*>(out + 16)[0] = scale;
    reinterpret_cast<uint32_t*>(out + 16)[1] = 0;
  }
}

constexpr int64_t kEfSignBlock = 4096;  // efsign.cc's kBlock: part of the scale's definition
constexpr int64_t kSignBlock = 1024;    // signsgd: any multiple of 16 gives the same bytes

template <bool kBf16>
const char* launch_half(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                        void* stream) {
  if (const char* error = detail::check_common(out, in, n, bad_index)) return error;
  if (const char* error = detail::reset_bad_index(bad_index, stream)) return error;
  const PayloadPrefix prefix = payload_prefix(kBf16 ? kBf16Id : kFp16Id, n, nullptr, 0);
  half_kernel<kBf16>
      <<<detail::grid_for(n / 4, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          out, in, n, prefix, bad_index);
  return detail::launch_status();
}

}  // namespace

const char* launch_fp16_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                               void* stream) {
  return launch_half<false>(out, in, n, bad_index, stream);
}

const char* launch_bf16_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                               void* stream) {
  return launch_half<true>(out, in, n, bad_index, stream);
}

const char* launch_signsgd_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                                  void* stream) {
  if (const char* error = detail::check_common(out, in, n, bad_index)) return error;
  if (const char* error = detail::reset_bad_index(bad_index, stream)) return error;
  const uint8_t params[8] = {1, 0, 0, 0,
                             1, 0, 0, 0};  // u32 voters = 1 | u8 width = 1 | 3 zero bytes
  const PayloadPrefix prefix = payload_prefix(kSignSgdId, n, params, sizeof params);
  const int64_t blocks = (n + kSignBlock - 1) / kSignBlock;
  sign_kernel<false>
      <<<detail::grid_for(blocks, kThreads / 4), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          out, in, n, kSignBlock, nullptr, prefix, bad_index);
  return detail::launch_status();
}

size_t efsign_workspace_bytes(int64_t n) {
  const int64_t blocks = n > 0 ? (n + kEfSignBlock - 1) / kEfSignBlock : 1;
  return static_cast<size_t>(blocks) * sizeof(double);
}

const char* launch_efsign_encode(uint8_t* out, const float* in, int64_t n, void* workspace,
                                 int64_t* bad_index, void* stream) {
  if (const char* error = detail::check_common(out, in, n, bad_index)) return error;
  if (workspace == nullptr)
    return "tidegate cuda efsign: workspace (efsign_workspace_bytes) is null";
  if (const char* error = detail::reset_bad_index(bad_index, stream)) return error;
  // The scale (bytes 16..23) is written by efsign_scale_kernel; the prefix here is the header.
  const PayloadPrefix prefix = payload_prefix(kEfSignId, n, nullptr, 0);
  const int64_t blocks = (n + kEfSignBlock - 1) / kEfSignBlock;
  double* sums = static_cast<double*>(workspace);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  sign_kernel<true><<<detail::grid_for(blocks, kThreads / 4), kThreads, 0, s>>>(
      out, in, n, kEfSignBlock, sums, prefix, bad_index);
  if (const char* error = detail::launch_status()) return error;
  efsign_scale_kernel<<<1, kThreads, 0, s>>>(out, sums, blocks, n);
  return detail::launch_status();
}

}  // namespace tidegate::cuda
