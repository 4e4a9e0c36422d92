// A few plain wrappers over the CUDA runtime for the GPU tests and benchmarks, so that they,
// like everything outside cuda/, need no CUDA header (DESIGN.md). They are not a general
// device-memory layer for the library: the collectives will get their own when they move
// device tensors. Every function returns nullptr on success or a static error message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tidegate::cuda {

// Number of usable GPUs; 0 with *why set when the runtime or driver reports none (no driver,
// no device, a CUDA error), so that tests can say why they skip.
int device_count(std::string* why);

// "NVIDIA H200, sm_90, 141 GiB, peak 4.8 TB/s" style description of the current device.
std::string device_description();
// Theoretical DRAM bandwidth of the current device in GB/s (2 x memory clock x bus width), or
// 0 when the driver does not report it.
double device_peak_gbps();

const char* device_alloc(void** ptr, size_t bytes);
const char* device_free(void* ptr);
const char* copy_to_device(void* dst, const void* src, size_t bytes);
const char* copy_to_host(void* dst, const void* src, size_t bytes);
// Device-to-device copy enqueued on the default stream (the memcpy reference of the benchmark).
const char* copy_device_to_device(void* dst, const void* src, size_t bytes);
const char* device_memset(void* ptr, int value, size_t bytes);
const char* device_synchronize();

// Times work enqueued on the default stream with CUDA events: start(), enqueue, stop() returns
// the elapsed milliseconds after waiting for the stop event (negative on an error).
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  float stop();

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace tidegate::cuda
