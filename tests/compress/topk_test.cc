// Top-k: exact against a full sort, deterministic ties, the approximate mode's bound, the sampled
// selection against the full one, edge cases and the non-finite policy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "compress/topk.h"
#include "compress/topk_select.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

std::vector<int64_t> selected(const std::string& spec, std::vector<float>& x) {
  auto codec = codec_from(spec);
  return nonzero_indices(
      decode_ok(*codec, encode_ok(*codec, view_of(x)), static_cast<int64_t>(x.size())));
}

TEST(TopK, KeepsExactlyTheKLargestMagnitudes) {
  for (size_t n : {1u, 7u, 100u, 1000u, 70000u, 300000u}) {
    std::vector<float> x = normal_floats(n, static_cast<uint32_t>(n));
    for (double ratio : {0.001, 0.01, 0.1, 0.5}) {
      auto codec = codec_from("topk:ratio=" + std::to_string(ratio));
      const auto k = static_cast<const TopKCodec&>(*codec).k_for(static_cast<int64_t>(n));
      const std::vector<float> y =
          decode_ok(*codec, encode_ok(*codec, view_of(x)), static_cast<int64_t>(n));
      const std::vector<int64_t> expect = reference_top_k(x, k);
      ASSERT_EQ(nonzero_indices(y), expect) << "n=" << n << " ratio=" << ratio;
      for (int64_t i : expect) ASSERT_EQ(y[i], x[i]);  // values are sent exactly
    }
  }
}

TEST(TopK, ReusedThresholdGivesTheSamePayloadAsAFreshSelection) {
  auto codec = codec_from("topk:ratio=0.01");
  const auto& topk = static_cast<const TopKCodec&>(*codec);
  uint32_t threshold = 0;
  for (uint32_t step = 0; step < 6; ++step) {
    // Similar gradients step to step (the case reuse is for), and one that is not (step 4: ten
    // times larger, so far more than k pass the old threshold).
    std::vector<float> x = normal_floats(300000, 17 + step);
    if (step == 4) {
      for (float& v : x) v *= 10.0f;
    }
    const std::vector<uint8_t> fresh = encode_ok(*codec, view_of(x));
    std::vector<uint8_t> reused(codec->max_payload_bytes(view_of(x)));
    size_t written = 0;
    ASSERT_TRUE(topk.encode_reusing_threshold(view_of(x), &threshold, reused.data(), reused.size(),
                                              &written)
                    .is_ok());
    reused.resize(written);
    EXPECT_EQ(reused, fresh) << "step " << step;
    EXPECT_NE(threshold, 0u) << "no threshold kept after step " << step;
  }
}

// The fused error-feedback path gives, bit for bit, what compensating, encoding with the reused
// threshold and subtracting the payload give one after another: the same payload, the same
// next threshold and the same residual, -0.0 inputs included; with and without a residual, in
// both modes, and when the threshold is too high (the exact fallback) or far too low (compactions).
TEST(TopK, TheFusedSumEncodingIsCompensateEncodeSubtractBitForBit) {
  for (const char* spec : {"topk:ratio=0.01", "topk:ratio=0.01,mode=approx"}) {
    auto codec = codec_from(spec);
    const auto& topk = static_cast<const TopKCodec&>(*codec);
    const int64_t n = 300001;
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x = normal_floats(n, 31 + variant);
      std::vector<float> r = normal_floats(n, 77 + variant);
      for (int64_t i = 0; i < n; i += 97) x[i] = -0.0f;
      const bool with_residual = variant != 1;
      // A threshold near the k-th magnitude (variant 0, 1), above every element (2: nothing
      // passes, the exact mode falls back) or far below it (3: the buffer compacts).
      uint32_t threshold = variant == 2 ? 0x7f000000u : (variant == 3 ? 0x30000000u : 0x40000000u);
      uint32_t fused_threshold = threshold;
      std::vector<float> expected_sum(n);
      for (int64_t i = 0; i < n; ++i) expected_sum[i] = x[i] + (with_residual ? r[i] : 0.0f);
      std::vector<uint8_t> expected(codec->max_payload_bytes(view_of(x)));
      size_t expected_bytes = 0;
      const Status encoded = topk.encode_reusing_threshold(
          view_of(expected_sum), &threshold, expected.data(), expected.size(), &expected_bytes);
      ASSERT_TRUE(encoded.is_ok()) << encoded.to_string();
      ASSERT_TRUE(
          codec->decode_subtract(expected.data(), expected_bytes, view_of(expected_sum)).is_ok());
      std::vector<uint8_t> got(expected.size());
      std::vector<float> sum(n, 5.0f);
      size_t got_bytes = 0;
      int64_t nonfinite = 0;
      ASSERT_TRUE(topk.encodes_sum_reusing_threshold(n, fused_threshold));
      ASSERT_TRUE(topk.encode_sum_reusing_threshold(x.data(), with_residual ? r.data() : nullptr,
                                                    sum.data(), n, &fused_threshold, got.data(),
                                                    got.size(), &got_bytes, &nonfinite)
                      .is_ok());
      EXPECT_EQ(nonfinite, -1);
      got.resize(got_bytes);
      expected.resize(expected_bytes);
      EXPECT_EQ(got, expected) << spec << " variant " << variant;
      EXPECT_EQ(fused_threshold, threshold) << spec << " variant " << variant;
      EXPECT_EQ(std::memcmp(sum.data(), expected_sum.data(), n * sizeof(float)), 0)
          << spec << " variant " << variant;
    }
  }
}

TEST(TopK, TheFusedSumEncodingNamesTheFirstNonFiniteSum) {
  auto codec = codec_from("topk:ratio=0.01");
  const auto& topk = static_cast<const TopKCodec&>(*codec);
  const int64_t n = 100000;
  std::vector<float> x = normal_floats(n, 5), r(n, 0.0f), sum(n);
  x[70000] = std::numeric_limits<float>::quiet_NaN();
  x[60000] = 3e38f;  // plus its residual overflows: the first non-finite sum
  r[60000] = 3e38f;
  std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)), 0xab);
  const std::vector<uint8_t> untouched = out;
  uint32_t threshold = 0x40000000u;
  size_t written = 0;
  int64_t nonfinite = -1;
  ASSERT_TRUE(topk.encode_sum_reusing_threshold(x.data(), r.data(), sum.data(), n, &threshold,
                                                out.data(), out.size(), &written, &nonfinite)
                  .is_ok());
  EXPECT_EQ(nonfinite, 60000);
  EXPECT_EQ(out, untouched);
  EXPECT_EQ(threshold, 0x40000000u);
}

TEST(TopK, TiesGoToTheLowerIndexEveryTime) {
  // Many equal magnitudes of both signs: the winners are the lowest indices, on every "rank".
  std::vector<float> x(200000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 3 == 0) ? 1.0f : ((i % 3 == 1) ? -1.0f : 0.5f);
  for (const char* spec : {"topk:k=1000", "topk:k=1000,mode=approx", "topk:k=150000"}) {
    const auto first = selected(spec, x);
    EXPECT_EQ(first, selected(spec, x)) << spec;
    auto codec = codec_from(spec);
    const int64_t k = static_cast<const TopKCodec&>(*codec).k_for(static_cast<int64_t>(x.size()));
    EXPECT_EQ(first, reference_top_k(x, k)) << spec;
  }
}

TEST(TopK, SampledSelectionMatchesTheFullOne) {
  // Shapes that stress the sampled threshold: heavy tails, many zeros, sorted magnitudes (which
  // force buffer compactions), and a single huge outlier.
  const int64_t n = 1 << 20;
  std::vector<std::vector<float>> inputs;
  inputs.push_back(normal_floats(n, 1));
  std::vector<float> sparse(n, 0.0f);
  for (int64_t i = 0; i < n; i += 97) sparse[i] = static_cast<float>(i % 13) - 6.0f;
  inputs.push_back(sparse);
  std::vector<float> rising(n);
  for (int64_t i = 0; i < n; ++i) rising[i] = static_cast<float>(i) * 1e-3f;
  inputs.push_back(rising);
  std::vector<float> outlier = normal_floats(n, 2, 1e-3f);
  outlier[n / 2] = 1e30f;
  inputs.push_back(outlier);
  for (size_t which = 0; which < inputs.size(); ++which) {
    for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{1000}, n / 100, n / 20}) {
      TopKSelection full, sampled;
      TopKStats stats;
      select_top_k_full(inputs[which].data(), n, k, &full);
      select_top_k(inputs[which].data(), n, k, TopKMode::kExact, &sampled, &stats);
      EXPECT_TRUE(stats.sampled) << which;
      ASSERT_EQ(sampled.index_list(), full.index_list()) << "input " << which << " k=" << k;
      ASSERT_EQ(sampled.value_list(), full.value_list());
    }
  }
}

TEST(TopK, ThreadCountDoesNotChangeThePayload) {
  // 4 Mi elements: up to four ranges of 1 Mi. Include the compacting and the shortfall paths.
  const int64_t n = int64_t{1} << 22;
  std::vector<float> x = normal_floats(static_cast<size_t>(n), 21);
  for (const char* spec : {"topk:ratio=0.01", "topk:ratio=0.01,mode=approx", "topk:k=5"}) {
    auto codec = codec_from(spec);
    std::vector<std::vector<uint8_t>> payloads;
    for (int threads : {1, 2, 3, 4}) {
      std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)));
      size_t written = 0;
      EncodeContext context;
      context.threads = threads;
      ASSERT_TRUE(codec->encode(view_of(x), context, out.data(), out.size(), &written).is_ok());
      out.resize(written);
      payloads.push_back(out);
    }
    for (size_t t = 1; t < payloads.size(); ++t)
      EXPECT_EQ(payloads[t], payloads[0]) << spec << " threads " << t + 1;
  }
  const std::vector<int64_t> top = reference_top_k(x, 4000);
  for (uint32_t threshold :
       {0u, 0x3f800000u /* 1.0: ~32% pass, compactions */, 0x40800000u /* 4.0: shortfall */}) {
    for (int threads : {1, 3}) {
      TopKSelection sel;
      TopKStats stats;
      select_top_k_above(x.data(), n, 4000, TopKMode::kExact, threshold, 4000, &sel, &stats,
                         threads);
      EXPECT_EQ(sel.index_list(), top) << threshold << " " << threads;
    }
  }
  // A NaN in a later range is reported as the first one even when an earlier range is clean.
  x[n - 5] = std::numeric_limits<float>::quiet_NaN();
  x[n / 2 + 7] = std::numeric_limits<float>::infinity();
  TopKSelection sel;
  select_top_k(x.data(), n, 1000, TopKMode::kExact, &sel, nullptr, 4);
  EXPECT_EQ(sel.nonfinite, n / 2 + 7);
}

TEST(TopK, ApproxKeepsTheExactTopKPrimeWithinItsBound) {
  const int64_t n = 1 << 20;
  for (uint32_t seed = 0; seed < 3; ++seed) {
    std::vector<float> x = normal_floats(n, seed);
    const std::vector<int64_t> order = magnitude_order(x);
    for (int64_t k : {int64_t{100}, n / 1000, n / 100, n / 20}) {
      TopKSelection approx;
      select_top_k(x.data(), n, k, TopKMode::kApprox, &approx);
      const int64_t kept = approx.size;
      EXPECT_GE(kept, approx_min_kept(k));
      EXPECT_LE(kept, k);
      // Whatever it kept is exactly the top `kept` elements, values bit-exact.
      ASSERT_EQ(approx.index_list(), top_of(order, kept));
      for (int64_t i = 0; i < approx.size; ++i) ASSERT_EQ(approx.values[i], x[approx.indices[i]]);
    }
  }
}

TEST(TopK, ShortfallFallsBackInExactModeAndIsAcceptedInApproxWithinBound) {
  // A threshold that only ~90% (then ~50%) of the top k pass, as a bad sample would give.
  const int64_t n = 1 << 20, k = 10000;
  std::vector<float> x = normal_floats(n, 9);
  const std::vector<int64_t> order = magnitude_order(x);
  const std::vector<int64_t> top = top_of(order, k);
  std::vector<float> magnitudes;
  for (int64_t i : top) magnitudes.push_back(std::fabs(x[i]));
  std::sort(magnitudes.begin(), magnitudes.end(), std::greater<>());
  for (double fraction : {0.9, 0.5}) {
    const float t = magnitudes[static_cast<size_t>(fraction * k) - 1];
    uint32_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    TopKSelection exact, approx;
    TopKStats exact_stats, approx_stats;
    select_top_k_above(x.data(), n, k, TopKMode::kExact, bits, k, &exact, &exact_stats);
    select_top_k_above(x.data(), n, k, TopKMode::kApprox, bits, k, &approx, &approx_stats);
    EXPECT_TRUE(exact_stats.fell_back);
    EXPECT_EQ(exact.index_list(), top);
    const bool accepted = fraction * k >= static_cast<double>(approx_min_kept(k));
    EXPECT_EQ(approx_stats.fell_back, !accepted) << fraction;
    const int64_t kept = approx.size;
    EXPECT_EQ(kept, accepted ? static_cast<int64_t>(fraction * k) : k);
    EXPECT_EQ(approx.index_list(), top_of(order, kept));
  }
  // A threshold far too low: the buffer fills and compacts repeatedly, still exact.
  TopKSelection low;
  TopKStats low_stats;
  select_top_k_above(x.data(), n, k, TopKMode::kExact, 0, k, &low, &low_stats);
  EXPECT_GT(low_stats.compactions, 0);
  EXPECT_FALSE(low_stats.fell_back);
  EXPECT_EQ(low.index_list(), top);
}

TEST(TopK, RememberedThresholdOnTensorsShorterThanABlock) {
  // A threshold carried over from an earlier step on a tensor shorter than one scan block:
  // the selection is the exact top k, never an index outside the tensor.
  for (int64_t n : {1, 7, 31, 33, 100}) {
    const std::vector<float> x = normal_floats(n, 11);
    const std::vector<int64_t> order = magnitude_order(x);
    for (int64_t k : {int64_t{1}, int64_t{2}, n}) {
      if (k > n) continue;
      for (uint32_t threshold : {0u, 0x3f000000u /* 0.5 */, 0x7f000000u /* huge */}) {
        TopKSelection sel;
        TopKStats stats;
        select_top_k_above(x.data(), n, k, TopKMode::kExact, threshold, k + k / 4, &sel, &stats);
        EXPECT_EQ(sel.index_list(), top_of(order, k)) << "n " << n << " k " << k;
      }
    }
  }
}

TEST(TopK, EdgeCounts) {
  std::vector<float> empty;
  auto codec = codec_from("topk:ratio=0.5");
  EXPECT_TRUE(decode_ok(*codec, encode_ok(*codec, view_of(empty)), 0).empty());
  std::vector<float> one = {-3.5f};
  EXPECT_EQ(decode_ok(*codec, encode_ok(*codec, view_of(one)), 1), one);  // k rounds up to 1
  // k >= n sends everything, as dense, no bigger than the tensor plus the prefix.
  std::vector<float> x = normal_floats(1000, 3);
  auto all = codec_from("topk:k=5000");
  const auto payload = encode_ok(*all, view_of(x));
  EXPECT_LE(payload.size(), x.size() * sizeof(float) + 32);
  EXPECT_EQ(decode_ok(*all, payload, 1000), x);
  // k = 0 and ratio = 0 send nothing.
  for (const char* spec : {"topk:k=0", "topk:ratio=0"}) {
    auto none = codec_from(spec);
    EXPECT_EQ(decode_ok(*none, encode_ok(*none, view_of(x)), 1000), std::vector<float>(1000, 0.0f));
  }
  // An all-zero tensor keeps the first k zeros (ties by index) and decodes to zeros.
  std::vector<float> zeros(100000, 0.0f);
  EXPECT_EQ(decode_ok(*codec_from("topk:k=10"), encode_ok(*codec_from("topk:k=10"), view_of(zeros)),
                      100000),
            zeros);
}

TEST(TopK, NonFiniteInputIsRefusedNamingTheFirstElement) {
  for (int64_t n : {int64_t{50}, int64_t{1} << 20}) {
    std::vector<float> x = normal_floats(static_cast<size_t>(n), 4);
    x[n / 3] = std::numeric_limits<float>::infinity();
    x[n / 2] = std::numeric_limits<float>::quiet_NaN();
    for (const char* spec :
         {"topk:ratio=0.01", "topk:ratio=0.01,mode=approx", "topk:k=0", "topk:ratio=1"}) {
      auto codec = codec_from(spec);
      std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)));
      size_t written = 0;
      const Status st =
          codec->encode(view_of(x), EncodeContext(), out.data(), out.size(), &written);
      ASSERT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << spec;
      EXPECT_NE(st.message().find("element " + std::to_string(n / 3)), std::string::npos)
          << st.message();
    }
  }
}

TEST(TopK, OtherDtypesEncodeAndDecode) {
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i)) * 3;
  TensorView in;
  in.data = x.data();
  in.count = 1000;
  in.dtype = TIDEGATE_FLOAT64;
  auto codec = codec_from("topk:k=10");
  std::vector<uint8_t> payload(codec->max_payload_bytes(in));
  size_t written = 0;
  ASSERT_TRUE(codec->encode(in, EncodeContext(), payload.data(), payload.size(), &written).is_ok());
  std::vector<double> y(1000, 1.0);
  TensorView out = in;
  out.data = y.data();
  ASSERT_TRUE(codec->decode_add(payload.data(), written, out).is_ok());
  int changed = 0;
  for (size_t i = 0; i < y.size(); ++i) changed += y[i] != 1.0 ? 1 : 0;
  EXPECT_EQ(changed, 10);
}

TEST(TopK, SpecsAreCanonicalAndCheckedAtCreation) {
  EXPECT_EQ(codec_from("topk")->spec(), "topk:ratio=0.01,mode=exact");
  EXPECT_EQ(codec_from("topk:k=1000")->spec(), "topk:k=1000,mode=exact");
  EXPECT_EQ(codec_from("topk:ratio=0.05,mode=approx")->spec(), "topk:ratio=0.05,mode=approx");
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(make_codec("topk:ratio=2", &codec).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(make_codec("topk:ratio=0.1,k=5", &codec).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(make_codec("topk:mode=fast", &codec).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_TRUE(codec_from("topk")->deterministic());
}

}  // namespace
}  // namespace tidegate
