// Random-k: the same indices from the same seed on every "rank", distinct sorted indices, one per
// stratum, unbiasedness of the scaled variant, payloads without indices, edge cases.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

#include "compress/randomk.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

TEST(RandomK, SameSeedSameIndicesOnEveryRank) {
  // Two "ranks" with different tensors but the same seed keep the same positions.
  std::vector<float> a = normal_floats(100000, 1), b = normal_floats(100000, 2);
  auto codec = codec_from("randomk:ratio=0.01");
  const auto pa = encode_ok(*codec, view_of(a), 77), pb = encode_ok(*codec, view_of(b), 77);
  EXPECT_EQ(nonzero_indices(decode_ok(*codec, pa, 100000)),
            nonzero_indices(decode_ok(*codec, pb, 100000)));
  EXPECT_EQ(pa, encode_ok(*codec, view_of(a), 77));  // and the same bytes for the same input
  EXPECT_NE(pa, encode_ok(*codec, view_of(a), 78));  // another seed, other positions
  EXPECT_FALSE(codec->deterministic());
}

TEST(RandomK, OneDistinctIndexPerStratumInOrder) {
  for (int64_t n : {int64_t{1}, int64_t{10}, int64_t{1000}, int64_t{1} << 40}) {
    for (int64_t k : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{999}}) {
      if (k >= n) continue;
      int64_t previous = -1;
      for (int64_t j = 0; j < k; ++j) {
        int64_t length = 0;
        const int64_t index = randomk_index(5, j, k, n, &length);
        ASSERT_GT(index, previous);
        ASSERT_GE(index, j * (n / k));  // inside stratum j = [floor(jn/k), floor((j+1)n/k))
        ASSERT_TRUE(length == n / k || length == n / k + 1);
        previous = index;
      }
      ASSERT_LT(previous, n);
    }
  }
}

TEST(RandomK, DecodeRegeneratesTheEncodersIndices) {
  std::vector<float> x = normal_floats(12345, 3);
  auto codec = codec_from("randomk:k=100");
  const std::vector<float> y = decode_ok(*codec, encode_ok(*codec, view_of(x), 9), 12345);
  std::vector<int64_t> expect;
  for (int64_t j = 0; j < 100; ++j) expect.push_back(randomk_index(9, j, 100, 12345));
  ASSERT_EQ(nonzero_indices(y), expect);
  for (int64_t i : expect) EXPECT_EQ(y[i], x[i]);  // unscaled by default
}

TEST(RandomK, ScaledVariantIsUnbiased) {
  // The mean of decode(encode(x)) over many seeds approaches x.
  const int64_t n = 1000;
  std::vector<float> x = normal_floats(n, 4);
  auto codec = codec_from("randomk:ratio=0.1,unbiased=1");
  std::vector<double> mean(n, 0.0);
  const int trials = 20000;
  for (int t = 0; t < trials; ++t) {
    const std::vector<float> y =
        decode_ok(*codec, encode_ok(*codec, view_of(x), static_cast<uint64_t>(t)), n);
    for (int64_t i = 0; i < n; ++i) mean[i] += y[i];
  }
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    // Each sample is x * 10 w.p. 1/10: the mean's standard error is |x| * 3 / sqrt(trials).
    const double error =
        std::fabs(mean[i] / trials - x[i]) / (std::fabs(x[i]) * 3.0 / std::sqrt(trials) + 1e-12);
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, 5.0) << "some element's mean is more than 5 standard errors off";
}

TEST(RandomK, PayloadCarriesValuesAndTheSeedOnly) {
  std::vector<float> x = normal_floats(1 << 20, 5);
  auto codec = codec_from("randomk");  // ratio 0.01
  const auto payload = encode_ok(*codec, view_of(x));
  EXPECT_EQ(payload.size(), kRandomKPrefixBytes + 10486 * sizeof(float));
  EXPECT_EQ(codec->spec(), "randomk:ratio=0.01,unbiased=0");
}

TEST(RandomK, EdgeCounts) {
  auto codec = codec_from("randomk:ratio=0.5");
  std::vector<float> empty;
  EXPECT_TRUE(decode_ok(*codec, encode_ok(*codec, view_of(empty)), 0).empty());
  std::vector<float> one = {2.0f};
  EXPECT_EQ(decode_ok(*codec, encode_ok(*codec, view_of(one)), 1), one);
  std::vector<float> x = normal_floats(100, 6);
  auto all = codec_from("randomk:k=100,unbiased=1");
  EXPECT_EQ(decode_ok(*all, encode_ok(*all, view_of(x)), 100), x);  // dense, unscaled
  auto none = codec_from("randomk:k=0");
  EXPECT_EQ(decode_ok(*none, encode_ok(*none, view_of(x)), 100), std::vector<float>(100, 0.0f));
}

TEST(RandomK, NonFiniteAnywhereIsRefused) {
  std::vector<float> x = normal_floats(1000, 7);
  x[999] = -std::numeric_limits<float>::infinity();  // most likely not sampled: still refused
  auto codec = codec_from("randomk:k=1");
  std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)));
  size_t written = 0;
  const Status st = codec->encode(view_of(x), EncodeContext(), out.data(), out.size(), &written);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("999"), std::string::npos) << st.message();
  // A scaled value that overflows float32 is refused too.
  std::vector<float> big(1000, 3e38f);
  auto scaled = codec_from("randomk:k=10,unbiased=1");
  EXPECT_EQ(scaled->encode(view_of(big), EncodeContext(), out.data(), out.size(), &written).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
}

TEST(RandomK, MalformedPayloadsAreRejected) {
  std::vector<float> x = normal_floats(1000, 8);
  auto codec = codec_from("randomk:k=50");
  const auto payload = encode_ok(*codec, view_of(x));
  expect_truncations_rejected(*codec, payload, 1000);
  std::vector<float> out(1000);
  auto decode_changed = [&](const std::function<void(std::vector<uint8_t>&)>& change) {
    std::vector<uint8_t> bad(payload);
    change(bad);
    return codec->decode(bad.data(), bad.size(), view_of(out)).code();
  };
  EXPECT_EQ(decode_changed([](auto& b) {
              const int64_t huge = int64_t{1} << 62;
              std::memcpy(b.data() + 16, &huge, sizeof huge);  // k beyond count
            }),
            TIDEGATE_ERR_PROTOCOL);
  EXPECT_EQ(decode_changed([](auto& b) { b.push_back(0); }),
            TIDEGATE_ERR_PROTOCOL);                                                // trailing byte
  EXPECT_EQ(decode_changed([](auto& b) { b[5] = 0x80; }), TIDEGATE_ERR_PROTOCOL);  // unknown flag
  EXPECT_EQ(decode_changed([](auto& b) {
              const float nan = std::numeric_limits<float>::quiet_NaN();
              std::memcpy(b.data() + kRandomKPrefixBytes, &nan, sizeof nan);
            }),
            TIDEGATE_ERR_PROTOCOL);
  // Any seed is harmless: indices are always in range.
  EXPECT_EQ(decode_changed([](auto& b) { std::fill(b.begin() + 24, b.begin() + 32, 0xff); }),
            TIDEGATE_OK);
}

}  // namespace
}  // namespace tidegate
