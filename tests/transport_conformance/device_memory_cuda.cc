// Device memory through the CUDA wrappers of cuda/device_runtime.h.
#include "device_memory.h"

#include "cuda/device_runtime.h"

namespace tidegate::conformance {

namespace {
std::string text(const char* error) { return error == nullptr ? "" : error; }
}  // namespace

int gpu_count(std::string* why) { return cuda::device_count(why); }
std::string gpu_alloc(void** ptr, size_t bytes) { return text(cuda::device_alloc(ptr, bytes)); }
void gpu_free(void* ptr) { (void)cuda::device_free(ptr); }
std::string gpu_write(void* dst, const void* src, size_t bytes) {
  return text(cuda::copy_to_device(dst, src, bytes));
}
std::string gpu_read(void* dst, const void* src, size_t bytes) {
  return text(cuda::copy_to_host(dst, src, bytes));
}

}  // namespace tidegate::conformance
