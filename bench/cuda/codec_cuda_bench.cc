// tidegate-cuda-bench: GPU encode throughput of every encoder in cuda/launch.h on one large
// float32 tensor, timed with CUDA events (warm-up, then the median of many runs), beside a
// device-to-device memcpy of the same tensor measured in the same run.
//
// Columns:
//   GBps         input bytes (count x 4) per second, as tidegate-codec-bench reports the CPU
//   memcpy_frac  GBps / the memcpy's GB/s (bytes copied per second)
//   dram_GBps    bytes the encoder moves (input read + payload written) per second
//   peak_frac    dram_GBps / the device's theoretical DRAM bandwidth
// A memcpy moves 2 bytes of traffic per byte copied, so memcpy's own peak_frac is printed too:
// it is the practical ceiling for peak_frac.
//
// Usage: tidegate-cuda-bench [--mib 256] [--runs 50] [--filter substring]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "cuda/device_runtime.h"
#include "tests/cuda/gpu_codec_table.h"

namespace {

using namespace tidegate;

struct Options {
  int64_t mib = 256;
  int runs = 50;
  std::string filter;
};

bool parse(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    if (flag == "--mib")
      options->mib = std::atoll(argv[++i]);
    else if (flag == "--runs")
      options->runs = std::atoi(argv[++i]);
    else if (flag == "--filter")
      options->filter = argv[++i];
    else
      return false;
  }
  return options->mib > 0 && options->runs > 0;
}

// Median milliseconds of `runs` timed calls of enqueue() after 3 untimed ones; negative when
// enqueue or the timer fails.
template <typename F>
float median_ms(int runs, F&& enqueue) {
  cuda::EventTimer timer;
  for (int i = 0; i < 3; ++i) {
    if (enqueue() != nullptr) return -1;
  }
  if (cuda::device_synchronize() != nullptr) return -1;
  std::vector<float> times;
  for (int i = 0; i < runs; ++i) {
    timer.start();
    if (enqueue() != nullptr) return -1;
    const float ms = timer.stop();
    if (ms < 0) return -1;
    times.push_back(ms);
  }
  std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
  return times[static_cast<size_t>(runs / 2)];
}

// Frees device buffers at exit.
struct Device {
  std::vector<void*> buffers;
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (const char* error = cuda::device_alloc(&p, bytes)) {
      std::fprintf(stderr, "cudaMalloc of %zu bytes failed: %s\n", bytes, error);
      std::exit(1);
    }
    buffers.push_back(p);
    return p;
  }
  ~Device() {
    for (void* p : buffers) cuda::device_free(p);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, &options)) {
    std::fprintf(stderr, "usage: %s [--mib 256] [--runs 50] [--filter substring]\n", argv[0]);
    return 2;
  }
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("tidegate-cuda-bench: no GPU (%s); nothing measured\n", why.c_str());
    return 0;
  }
  const int64_t n = options.mib * (int64_t{1} << 20) / 4;
  const size_t in_bytes = static_cast<size_t>(n) * sizeof(float);
  Device device;
  auto* in = static_cast<float*>(device.alloc(in_bytes));
  auto* copy = device.alloc(in_bytes);
  auto* bad = static_cast<int64_t*>(device.alloc(sizeof(int64_t)));
  void* workspace = device.alloc(cuda::efsign_workspace_bytes(n));
  {
    std::vector<float> host(static_cast<size_t>(n));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    for (float& v : host) v = normal(rng);
    if (const char* error = cuda::copy_to_device(in, host.data(), in_bytes)) {
      std::fprintf(stderr, "copy to device failed: %s\n", error);
      return 1;
    }
  }
  const double peak = cuda::device_peak_gbps();
  std::printf("# %s\n# %lld float32 elements (%lld MiB), median of %d runs after 3 warm-up runs\n",
              cuda::device_description().c_str(), static_cast<long long>(n),
              static_cast<long long>(options.mib), options.runs);

  const float memcpy_ms =
      median_ms(options.runs, [&] { return cuda::copy_device_to_device(copy, in, in_bytes); });
  const double memcpy_gbps = in_bytes / (memcpy_ms * 1e-3) / 1e9;
  std::printf("%-36s %9s %9s %11s %10s %9s\n", "codec", "ms", "GBps", "memcpy_frac", "dram_GBps",
              "peak_frac");
  std::printf("%-36s %9.3f %9.1f %11.3f %10.1f %9.3f\n", "memcpy (device to device)", memcpy_ms,
              memcpy_gbps, 1.0, 2 * memcpy_gbps, peak > 0 ? 2 * memcpy_gbps / peak : 0.0);

  int failures = 0;
  for (const cuda_test::GpuCodec& gpu : cuda_test::gpu_codecs()) {
    if (!options.filter.empty() && gpu.spec.find(options.filter) == std::string::npos) continue;
    std::unique_ptr<Codec> codec;
    if (!make_codec(gpu.spec, &codec).is_ok()) continue;
    TensorView like;
    like.count = n;
    const size_t payload_bytes = codec->max_payload_bytes(like);
    auto* out = static_cast<uint8_t*>(device.alloc(payload_bytes));
    const float ms =
        median_ms(options.runs, [&] { return gpu.encode(out, in, n, workspace, bad, 12345); });
    if (ms < 0) {
      std::printf("%-36s failed\n", gpu.spec.c_str());
      ++failures;
      continue;
    }
    const double gbps = in_bytes / (ms * 1e-3) / 1e9;
    const double dram = (in_bytes + payload_bytes) / (ms * 1e-3) / 1e9;
    std::printf("%-36s %9.3f %9.1f %11.3f %10.1f %9.3f\n", gpu.spec.c_str(), ms, gbps,
                gbps / memcpy_gbps, dram, peak > 0 ? dram / peak : 0.0);
    cuda::device_free(out);
    device.buffers.pop_back();
  }
  return failures == 0 ? 0 : 1;
}
