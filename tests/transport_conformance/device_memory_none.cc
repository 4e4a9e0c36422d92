// A build without the CUDA helpers of cuda/: no device memory, so device-only transports skip.
#include "device_memory.h"

namespace tidegate::conformance {

namespace {
constexpr const char* kNoCuda = "this build has no CUDA helpers (TIDEGATE_WITH_CUDA is off)";
}  // namespace

int gpu_count(std::string* why) {
  *why = kNoCuda;
  return 0;
}
std::string gpu_alloc(void** ptr, size_t) {
  *ptr = nullptr;
  return kNoCuda;
}
void gpu_free(void*) {}
std::string gpu_write(void*, const void*, size_t) { return kNoCuda; }
std::string gpu_read(void*, const void*, size_t) { return kNoCuda; }

}  // namespace tidegate::conformance
