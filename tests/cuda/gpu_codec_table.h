// The GPU encoders paired with the CPU codec spec each must match, shared by the GPU tests and
// the GPU benchmark (bench/cuda/). Each entry launches cuda/launch.h's encoder for one spec.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/launch.h"

namespace tidegate::cuda_test {

// Device pointers: out (payload), in (float32), workspace (efsign's block sums), bad_index.
using GpuEncode = std::function<const char*(uint8_t* out, const float* in, int64_t n,
                                            void* workspace, int64_t* bad_index, uint64_t seed)>;

struct GpuCodec {
  std::string spec;  // the CPU codec (make_codec) whose payload the GPU must reproduce
  int64_t bucket;    // elements per bucket (1 for element-wise codecs): sizes are chosen around it
  bool seeded;       // stochastic: bytes depend on the seed (and equal the CPU's for that seed)
  GpuEncode encode;
};

inline std::vector<GpuCodec> gpu_codecs() {
  using namespace tidegate::cuda;
  auto maxmin = [](unsigned bits, int64_t bucket, bool stochastic) {
    return GpuCodec{"maxmin:bits=" + std::to_string(bits) + ",bucket=" + std::to_string(bucket) +
                        ",rounding=" + (stochastic ? "stochastic" : "nearest"),
                    bucket, stochastic,
                    [=](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t s) {
                      return launch_maxmin_encode(o, i, n, bits, bucket, stochastic, s, b, nullptr);
                    }};
  };
  auto qsgd = [](unsigned bits, int64_t bucket) {
    return GpuCodec{"qsgd:bits=" + std::to_string(bits) + ",bucket=" + std::to_string(bucket),
                    bucket, true,
                    [=](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t s) {
                      return launch_qsgd_encode(o, i, n, bits, bucket, s, b, nullptr);
                    }};
  };
  auto onebit = [](int64_t bucket) {
    return GpuCodec{"onebit:bucket=" + std::to_string(bucket), bucket, false,
                    [=](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t) {
                      return launch_onebit_encode(o, i, n, bucket, b, nullptr);
                    }};
  };
  auto terngrad = [](int64_t bucket) {
    return GpuCodec{"terngrad:bucket=" + std::to_string(bucket), bucket, true,
                    [=](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t s) {
                      return launch_terngrad_encode(o, i, n, bucket, s, b, nullptr);
                    }};
  };
  return {
      {"fp16", 1, false,
       [](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t) {
         return launch_fp16_encode(o, i, n, b, nullptr);
       }},
      {"bf16", 1, false,
       [](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t) {
         return launch_bf16_encode(o, i, n, b, nullptr);
       }},
      {"signsgd", 1, false,
       [](uint8_t* o, const float* i, int64_t n, void*, int64_t* b, uint64_t) {
         return launch_signsgd_encode(o, i, n, b, nullptr);
       }},
      {"efsign", 4096, false,
       [](uint8_t* o, const float* i, int64_t n, void* w, int64_t* b, uint64_t) {
         return launch_efsign_encode(o, i, n, w, b, nullptr);
       }},
      onebit(512),
      onebit(24),
      maxmin(4, 512, false),
      maxmin(3, 40, false),
      maxmin(6, 64, false),
      maxmin(1, 8, false),
      maxmin(8, 512, false),
      maxmin(4, 512, true),
      maxmin(5, 136, true),
      maxmin(2, 512, true),
      qsgd(2, 512),
      qsgd(4, 512),
      qsgd(8, 512),
      qsgd(4, 24),
      terngrad(512),
      terngrad(8),
  };
}

}  // namespace tidegate::cuda_test
