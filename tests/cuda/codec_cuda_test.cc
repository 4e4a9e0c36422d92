// GPU encoders (cuda/launch.h) against the CPU codecs: for every codec in gpu_codec_table.h,
// several sizes around its bucket and several kinds of input (signed zeros, denormals,
// constant and all-zero buckets, values near fp16's limit), the GPU payload must equal the CPU
// payload byte for byte - for the stochastic codecs too, with the same seed, because both
// draw from the counter-based stream of compress/stochastic.h. Non-finite input must be
// refused by both, naming the same element. Without a GPU every test skips (never passes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "cuda/device_runtime.h"
#include "tests/cuda/gpu_codec_table.h"

namespace tidegate {
namespace cuda_test {
// Test names and failure messages show the spec instead of the entry's bytes.
void PrintTo(const GpuCodec& codec, std::ostream* os) { *os << codec.spec; }
}  // namespace cuda_test

namespace {

using cuda_test::GpuCodec;

// Device buffers freed at scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cuda::device_alloc(&ptr, bytes), nullptr); }
  ~DeviceBuffer() {
    if (ptr != nullptr) cuda::device_free(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

enum class Fill { kNormal, kSpecial, kConstant };

// Gradient-like values; kSpecial mixes in signed zeros, float denormals, fp16-subnormal and
// rounding-tie values, all-zero and constant runs; kConstant is one value throughout.
std::vector<float> make_input(int64_t n, Fill fill, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float v = normal(rng) * 0.01f;
    if (fill == Fill::kConstant) v = 0.375f;
    if (fill == Fill::kSpecial) {
      switch (rng() % 10) {
        case 0:
          v = (rng() & 1) ? 0.0f : -0.0f;
          break;
        case 1:
          v = std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 1000);
          break;
        case 2:
          v = std::ldexp(static_cast<float>(rng() % 2048) + 0.5f, -24 - 10);
          break;  // f16 subnormal ties
        case 3:
          v = 1.0f + std::ldexp(1.0f, -11) * static_cast<float>(rng() % 3);
          break;  // ties to even
        case 4:
          v = (rng() & 1) ? 65504.0f : -65519.0f;
          break;  // fp16's edge
        default:
          break;
      }
      if (i / 512 % 7 == 3) v = 0.0f;   // an all-zero bucket now and then
      if (i / 512 % 7 == 5) v = -2.5f;  // and a constant one
    }
    x[static_cast<size_t>(i)] = v;
  }
  return x;
}

std::vector<uint8_t> cpu_encode(const Codec& codec, const std::vector<float>& x, uint64_t seed,
                                Status* status) {
  TensorView view;
  view.data = const_cast<float*>(x.data());
  view.count = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(codec.max_payload_bytes(view));
  EncodeContext context;
  context.seed = seed;
  size_t written = 0;
  *status = codec.encode(view, context, out.data(), out.size(), &written);
  out.resize(status->is_ok() ? written : 0);
  return out;
}

// Runs the GPU encoder; returns the payload (max_payload_bytes long) and the refused index.
std::vector<uint8_t> gpu_encode(const GpuCodec& gpu, size_t payload_bytes,
                                const std::vector<float>& x, uint64_t seed, int64_t* bad_index) {
  const int64_t n = static_cast<int64_t>(x.size());
  DeviceBuffer in(x.size() * sizeof(float)), out(payload_bytes), bad(sizeof(int64_t));
  DeviceBuffer workspace(cuda::efsign_workspace_bytes(n));
  if (!x.empty()) {
    EXPECT_EQ(cuda::copy_to_device(in.ptr, x.data(), x.size() * sizeof(float)), nullptr);
  }
  EXPECT_EQ(cuda::device_memset(out.ptr, 0xa5, payload_bytes),
            nullptr);  // garbage: every byte must be written
  const char* error = gpu.encode(static_cast<uint8_t*>(out.ptr), static_cast<const float*>(in.ptr),
                                 n, workspace.ptr, static_cast<int64_t*>(bad.ptr), seed);
  EXPECT_EQ(error, nullptr) << gpu.spec << ": " << error;
  EXPECT_EQ(cuda::device_synchronize(), nullptr);
  std::vector<uint8_t> payload(payload_bytes);
  EXPECT_EQ(cuda::copy_to_host(payload.data(), out.ptr, payload_bytes), nullptr);
  EXPECT_EQ(cuda::copy_to_host(bad_index, bad.ptr, sizeof(int64_t)), nullptr);
  return payload;
}

class GpuCodecTest : public ::testing::TestWithParam<GpuCodec> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    ASSERT_TRUE(make_codec(GetParam().spec, &codec_).is_ok()) << GetParam().spec;
  }

  void expect_same(const std::vector<float>& x, uint64_t seed, const std::string& what) {
    Status status;
    const std::vector<uint8_t> expected = cpu_encode(*codec_, x, seed, &status);
    ASSERT_TRUE(status.is_ok()) << what << ": " << status.to_string();
    int64_t bad = 0;
    const std::vector<uint8_t> got = gpu_encode(GetParam(), expected.size(), x, seed, &bad);
    EXPECT_GE(bad, static_cast<int64_t>(x.size())) << what << ": the GPU refused element " << bad;
    size_t first_diff = expected.size();
    for (size_t i = 0; i < expected.size() && first_diff == expected.size(); ++i) {
      if (expected[i] != got[i]) first_diff = i;
    }
    EXPECT_EQ(first_diff, expected.size())
        << GetParam().spec << ", " << what << ": payloads of " << expected.size()
        << " bytes differ first at byte " << first_diff;
  }

  std::vector<int64_t> sizes() const {
    const int64_t b = GetParam().bucket;
    return {0, 1, 7, 17, b > 1 ? b - 1 : 3, b, b + 8, 3 * b + 5, (int64_t{1} << 20) + 3};
  }

  std::unique_ptr<Codec> codec_;
};

TEST_P(GpuCodecTest, MatchesCpuOnGradientLikeInput) {
  for (int64_t n : sizes())
    expect_same(make_input(n, Fill::kNormal, 1), 42, "normal n=" + std::to_string(n));
}

TEST_P(GpuCodecTest, MatchesCpuOnDenormalsZerosAndConstantBuckets) {
  for (int64_t n : sizes()) {
    std::vector<float> x = make_input(n, Fill::kSpecial, 2);
    if (GetParam().spec == "fp16") {
      for (float& v : x) v = std::fabs(v) >= 65520.0f ? 65504.0f : v;  // keep it encodable
    }
    expect_same(x, 7, "special n=" + std::to_string(n));
    expect_same(make_input(n, Fill::kConstant, 3), 7, "constant n=" + std::to_string(n));
  }
}

TEST_P(GpuCodecTest, StochasticBytesFollowTheSeed) {
  const std::vector<float> x = make_input(100003, Fill::kNormal, 4);
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}})
    expect_same(x, seed, "seed " + std::to_string(seed));
}

TEST_P(GpuCodecTest, RefusesNonFiniteAtTheSameElement) {
  const int64_t n = 50000;
  for (float poison : {std::nanf(""), INFINITY, -INFINITY}) {
    std::vector<float> x = make_input(n, Fill::kNormal, 5);
    x[31337] = poison;
    x[40000] = poison;
    Status status;
    cpu_encode(*codec_, x, 9, &status);
    EXPECT_FALSE(status.is_ok()) << GetParam().spec << " accepted " << poison;
    EXPECT_NE(status.to_string().find("31337"), std::string::npos) << status.to_string();
    int64_t bad = 0;
    gpu_encode(GetParam(), codec_->max_payload_bytes(TensorView{nullptr, n}), x, 9, &bad);
    EXPECT_EQ(bad, 31337) << GetParam().spec << " with " << poison;
  }
}

TEST_P(GpuCodecTest, RefusesFp16Overflow) {
  if (GetParam().spec != "fp16") GTEST_SKIP() << "only fp16 has finite values it cannot encode";
  std::vector<float> x = make_input(4099, Fill::kNormal, 6);
  x[4097] = 65520.0f;  // rounds to infinity in binary16
  Status status;
  cpu_encode(*codec_, x, 0, &status);
  EXPECT_FALSE(status.is_ok());
  int64_t bad = 0;
  gpu_encode(GetParam(), codec_->max_payload_bytes(TensorView{nullptr, 4099}), x, 0, &bad);
  EXPECT_EQ(bad, 4097);
}

INSTANTIATE_TEST_SUITE_P(Codecs, GpuCodecTest, ::testing::ValuesIn(cuda_test::gpu_codecs()),
                         [](const ::testing::TestParamInfo<GpuCodec>& param_info) {
                           std::string name;
                           for (char c : param_info.param.spec)
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace tidegate
