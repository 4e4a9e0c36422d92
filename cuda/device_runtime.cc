// Plain wrappers over the CUDA runtime (device_runtime.h). Compiled as C++ against the CUDA
// headers; it is the only host file outside the kernels that sees them.
#include "cuda/device_runtime.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace tidegate::cuda {

namespace {
const char* message(cudaError_t e) { return e == cudaSuccess ? nullptr : cudaGetErrorString(e); }
}  // namespace

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (why != nullptr) *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount reports no GPU";
  return count;
}

double device_peak_gbps() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  // Attributes rather than cudaDeviceProp fields: CUDA 13 removed memoryClockRate from the struct.
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess)
    return 0;
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess)
    return 0;
  // Double data rate: two transfers per clock on the bus.
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

std::string device_description() {
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    return "unknown device";
  }
  char text[128];
  std::snprintf(text, sizeof text, ", sm_%d%d, %.0f GiB, peak %.0f GB/s", prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1ull << 30), device_peak_gbps());
  return std::string(prop.name) + text;
}

const char* device_alloc(void** ptr, size_t bytes) {
  return message(cudaMalloc(ptr, bytes == 0 ? 1 : bytes));
}
const char* device_free(void* ptr) { return message(cudaFree(ptr)); }
const char* copy_to_device(void* dst, const void* src, size_t bytes) {
  return message(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
const char* copy_to_host(void* dst, const void* src, size_t bytes) {
  return message(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
const char* copy_device_to_device(void* dst, const void* src, size_t bytes) {
  return message(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr));
}
const char* device_memset(void* ptr, int value, size_t bytes) {
  return message(cudaMemset(ptr, value, bytes));
}
const char* device_synchronize() { return message(cudaDeviceSynchronize()); }

EventTimer::EventTimer() {
  cudaEvent_t a = nullptr, b = nullptr;
  if (cudaEventCreate(&a) == cudaSuccess) start_ = a;
  if (cudaEventCreate(&b) == cudaSuccess) stop_ = b;
}

EventTimer::~EventTimer() {
  if (start_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  if (stop_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start() {
  if (start_ != nullptr) cudaEventRecord(static_cast<cudaEvent_t>(start_), nullptr);
}

float EventTimer::stop() {
  if (start_ == nullptr || stop_ == nullptr) return -1;
  float ms = -1;
  if (cudaEventRecord(static_cast<cudaEvent_t>(stop_), nullptr) != cudaSuccess) return -1;
  if (cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)) != cudaSuccess) return -1;
  if (cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_),
                           static_cast<cudaEvent_t>(stop_)) != cudaSuccess) {
    return -1;
  }
  return ms;
}

}  // namespace tidegate::cuda
