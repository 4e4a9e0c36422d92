// Device memory for the conformance bodies when a transport moves only device memory (nccl).
// Two implementations, chosen by the build: device_memory_cuda.cc over cuda/device_runtime.h,
// device_memory_none.cc for a build without the CUDA helpers. No CUDA header here.
#pragma once

#include <cstddef>
#include <string>

namespace tidegate::conformance {

// Usable GPUs; 0 with *why set when there are none (or the build has no CUDA helpers).
int gpu_count(std::string* why);

// Each returns "" on success or what failed.
std::string gpu_alloc(void** ptr, size_t bytes);
void gpu_free(void* ptr);
std::string gpu_write(void* dst, const void* src, size_t bytes);
std::string gpu_read(void* dst, const void* src, size_t bytes);

}  // namespace tidegate::conformance
