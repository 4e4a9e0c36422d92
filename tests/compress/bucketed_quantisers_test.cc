// qsgd, maxmin, terngrad and onebit: payloads equal to the reference encoders byte for byte,
// stated error bounds, unbiasedness over seeds, and the awkward buckets (all zero, constant,
// subnormal, short last bucket).
#include <gtest/gtest.h>

#include <cmath>

#include "quantiser_reference.h"

namespace tidegate {
namespace {

using namespace qtest;

// Gradient values with special buckets (for bucket 64): zeros, a constant, subnormals, a
// single huge value, a -0 / +0 mix.
std::vector<float> special(int64_t n, uint64_t salt) {
  std::vector<float> x = gradient(n, salt);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / 64 % 8;
    if (b == 0) x[static_cast<size_t>(i)] = 0.0f;
    if (b == 1) x[static_cast<size_t>(i)] = 0.5f;
    if (b == 2) x[static_cast<size_t>(i)] = static_cast<float>(i % 7 - 3) * 1e-42f;
    if (b == 3 && i % 64 == 5) x[static_cast<size_t>(i)] = -3e30f;
    if (b == 4) x[static_cast<size_t>(i)] = (i % 2) ? -0.0f : 0.0f;
  }
  return x;
}

struct Case {
  std::string spec;
  std::function<std::vector<uint8_t>(const std::vector<float>&, uint64_t seed)> reference;
};

std::vector<Case> cases() {
  return {
      {"qsgd:bits=2,bucket=64", [](auto& x, uint64_t s) { return ref_qsgd(x, 2, 64, s); }},
      {"qsgd:bits=4,bucket=512", [](auto& x, uint64_t s) { return ref_qsgd(x, 4, 512, s); }},
      {"qsgd:bits=8,bucket=8", [](auto& x, uint64_t s) { return ref_qsgd(x, 8, 8, s); }},
      {"maxmin:bits=1,bucket=64,rounding=nearest",
       [](auto& x, uint64_t) { return ref_maxmin(x, 1, 64, false, 0); }},
      {"maxmin:bits=3,bucket=64",
       [](auto& x, uint64_t s) { return ref_maxmin(x, 3, 64, true, s); }},
      {"maxmin:bits=4,bucket=512",
       [](auto& x, uint64_t s) { return ref_maxmin(x, 4, 512, true, s); }},
      {"maxmin:bits=5,bucket=1032,rounding=nearest",
       [](auto& x, uint64_t) { return ref_maxmin(x, 5, 1032, false, 0); }},
      {"maxmin:bits=8,bucket=64",
       [](auto& x, uint64_t s) { return ref_maxmin(x, 8, 64, true, s); }},
      {"terngrad:bucket=64", [](auto& x, uint64_t s) { return ref_terngrad(x, 64, s); }},
      {"terngrad:bucket=2048", [](auto& x, uint64_t s) { return ref_terngrad(x, 2048, s); }},
      {"onebit:bucket=64", [](auto& x, uint64_t) { return ref_onebit(x, 64); }},
      {"onebit:bucket=512", [](auto& x, uint64_t) { return ref_onebit(x, 512); }},
  };
}

TEST(BucketedQuantisers, PayloadsMatchTheReferenceByteForByte) {
  for (const Case& c : cases()) {
    auto codec = make(c.spec);
    for (int64_t n : {0, 1, 7, 8, 63, 64, 65, 511, 512, 513, 1031, 1033, 5000, 70001}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{987654321}}) {
        const std::vector<float> x = special(n, seed + 7);
        std::vector<float> copy = x;
        const auto payload = encode(*codec, view_of(copy), seed);
        ASSERT_EQ(payload, c.reference(x, seed)) << c.spec << " n=" << n << " seed=" << seed;
        ASSERT_EQ(payload.size(), codec->max_payload_bytes(view_of(copy))) << c.spec;
        ASSERT_EQ(copy, x) << "encode modified its input";
      }
    }
  }
}

// Largest decoding error allowed for element x of a bucket: one quantisation step (half a step
// for nearest rounding, the whole scale for 1-bit means), plus float rounding.
TEST(BucketedQuantisers, DecodedValuesStayWithinTheStatedBound) {
  const std::vector<float> x = special(20000, 3);
  for (const Case& c : cases()) {
    auto codec = make(c.spec);
    const auto payload = encode(*codec, view_of(const_cast<std::vector<float>&>(x)), 42);
    const auto y = decode(*codec, payload, 20000);
    const int64_t bucket = std::stoll(c.spec.substr(c.spec.find("bucket=") + 7));
    for (int64_t first = 0; first < 20000; first += bucket) {
      const int64_t m = std::min<int64_t>(bucket, 20000 - first);
      float lo = x[first], hi = x[first], amax = 0;
      double squares = 0;
      for (int64_t i = first; i < first + m; ++i) {
        lo = std::min(lo, x[i]), hi = std::max(hi, x[i]), amax = std::max(amax, std::fabs(x[i]));
        squares += static_cast<double>(x[i]) * x[i];
      }
      double bound = 0;
      if (c.spec.rfind("qsgd", 0) == 0) {
        const int bits = c.spec[10] - '0';
        bound = std::sqrt(squares) / ((1 << (bits - 1)) - 1);
      } else if (c.spec.rfind("maxmin", 0) == 0) {
        const int bits = c.spec[12] - '0';
        const double step = (static_cast<double>(hi) - lo) / ((1 << bits) - 1);
        bound = c.spec.find("nearest") != std::string::npos ? step / 2 : step;
      } else {  // terngrad and onebit: within the bucket's magnitude range
        bound = c.spec.rfind("onebit", 0) == 0 ? static_cast<double>(hi) - lo : amax;
      }
      for (int64_t i = first; i < first + m; ++i) {
        const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
        // Slack: float rounding, and for subnormal buckets up to one subnormal ulp per level
        // (the unit norm / L is itself subnormal and rounded).
        ASSERT_LE(err, bound * (1 + 1e-5) + 1e-6 * amax + 255 * 0x1p-149)
            << c.spec << " element " << i;
        ASSERT_TRUE(std::isfinite(y[i]));
      }
    }
  }
}

TEST(BucketedQuantisers, StochasticCodecsAreUnbiasedOverSeeds) {
  const std::vector<float> x = gradient(256, 11, 1.0f);
  for (const char* spec :
       {"qsgd:bits=2,bucket=64", "qsgd:bits=4,bucket=256", "maxmin:bits=2,bucket=64",
        "maxmin:bits=4,bucket=128", "terngrad:bucket=64"}) {
    auto codec = make(spec);
    EXPECT_FALSE(codec->deterministic()) << spec;
    constexpr int kSeeds = 4000;
    std::vector<double> mean(x.size(), 0.0), max_error(x.size(), 0.0);
    for (int s = 0; s < kSeeds; ++s) {
      const auto y = decode(
          *codec, encode(*codec, view_of(const_cast<std::vector<float>&>(x)), 1000 + s), 256);
      for (size_t i = 0; i < x.size(); ++i) {
        mean[i] += y[i] / kSeeds;
        max_error[i] = std::max(max_error[i], std::fabs(static_cast<double>(y[i]) - x[i]));
      }
    }
    // Each draw is within one step w of x, so the mean of kSeeds draws has a standard deviation
    // of at most w / (2 sqrt(kSeeds)); allow six of them.
    for (size_t i = 0; i < x.size(); ++i) {
      const double step = std::max(max_error[i], 1e-30);
      ASSERT_LE(std::fabs(mean[i] - x[i]), 6 * step / (2 * std::sqrt(kSeeds)) + 1e-7)
          << spec << " element " << i;
    }
  }
}

TEST(BucketedQuantisers, DeterminismAndSeeds) {
  const std::vector<float> base = gradient(9000, 5);
  for (const Case& c : cases()) {
    auto codec = make(c.spec);
    std::vector<float> x = base;
    const auto a = encode(*codec, view_of(x), 7);
    EXPECT_EQ(a, encode(*codec, view_of(x), 7)) << c.spec;
    const auto other = encode(*codec, view_of(x), 8);
    if (codec->deterministic()) {
      EXPECT_EQ(a, other) << c.spec << " ignores the seed";
    } else {
      EXPECT_NE(a, other) << c.spec << " uses the seed";
    }
  }
}

TEST(BucketedQuantisers, DecodeAddAddsTheDecodedValues) {
  const std::vector<float> x = gradient(3000, 8);
  for (const Case& c : cases()) {
    auto codec = make(c.spec);
    const auto payload = encode(*codec, view_of(const_cast<std::vector<float>&>(x)), 3);
    const auto y = decode(*codec, payload, 3000);
    std::vector<float> acc(3000);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(i) * 0.25f;
    ASSERT_TRUE(codec->decode_add(payload.data(), payload.size(), view_of(acc)).is_ok());
    for (size_t i = 0; i < acc.size(); ++i)
      ASSERT_EQ(acc[i], static_cast<float>(i) * 0.25f + y[i]) << c.spec;
  }
}

TEST(BucketedQuantisers, ConstantAndZeroBucketsDecodeExactly) {
  for (const char* spec :
       {"qsgd:bits=4,bucket=64", "maxmin:bits=4,bucket=64",
        "maxmin:bits=2,bucket=64,rounding=nearest", "terngrad:bucket=64", "onebit:bucket=64"}) {
    auto codec = make(spec);
    std::vector<float> zeros(200, 0.0f), constant(200, -0.75f);
    EXPECT_EQ(decode(*codec, encode(*codec, view_of(zeros), 1), 200), zeros) << spec;
    if (std::string(spec).rfind("maxmin", 0) == 0 || std::string(spec).rfind("onebit", 0) == 0) {
      EXPECT_EQ(decode(*codec, encode(*codec, view_of(constant), 1), 200), constant) << spec;
    }
  }
}

}  // namespace
}  // namespace tidegate
