// Host-side checks and sizing shared by the launch_* functions (device_common.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/launch_common.h"

namespace tidegate::cuda::detail {

int grid_for(int64_t units, int64_t per_block) {
  static const int cap = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      sms = 132;  // an H100's count; only the grid size depends on it, never the bytes
    }
    return sms * 32;  // enough resident blocks to hide DRAM latency, few enough to amortise setup
  }();
  const int64_t blocks = (units + per_block - 1) / per_block;
  return static_cast<int>(std::clamp<int64_t>(blocks, 1, cap));
}

const char* check_common(const uint8_t* out, const float* in, int64_t n, const int64_t* bad_index) {
  if (n < 0) return "tidegate cuda encode: the element count is negative";
  if (out == nullptr || bad_index == nullptr)
    return "tidegate cuda encode: out and bad_index must be device pointers";
  if (n > 0 && in == nullptr) return "tidegate cuda encode: input is null but the count is not 0";
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0 || reinterpret_cast<uintptr_t>(in) % 16 != 0) {
    return "tidegate cuda encode: out and in must be 16-byte aligned (as cudaMalloc returns them)";
  }
  return nullptr;
}

const char* reset_bad_index(int64_t* bad_index, void* stream) {
  // 0x7f in every byte: 0x7f7f7f7f7f7f7f7f, larger than any element index.
  const cudaError_t e =
      cudaMemsetAsync(bad_index, 0x7f, sizeof(int64_t), static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* launch_status() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace tidegate::cuda::detail
