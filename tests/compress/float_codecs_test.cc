// none, fp16 and bf16 against references built from collectives/half.h, the vectorised
// conversions (half_vec.h) against half.h bit for bit, and the non-finite policy.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compress/half_vec.h"
#include "numeric/half.h"
#include "quantiser_test_util.h"

namespace tidegate {
namespace {

using qtest::decode;
using qtest::encode;
using qtest::is_error;
using qtest::make;
using qtest::view_of;

// Bit patterns that exercise every rounding case: each exponent and sign with mantissas at the
// f16 rounding boundaries, plus a sweep over the whole 32-bit space.
std::vector<uint32_t> float_patterns() {
  std::vector<uint32_t> p;
  const uint32_t mantissas[] = {0,        1,        0xfff,    0x1000,  0x1001,   0x1fff,
                                0x2000,   0x3000,   0x5fff,   0x6000,  0x400000, 0x7fe000,
                                0x7fefff, 0x7ff000, 0x7fffff, 0x123456};
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t e = 0; e < 256; ++e) {
      for (uint32_t m : mantissas) p.push_back(sign << 31 | e << 23 | m);
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65521) p.push_back(static_cast<uint32_t>(u));
  return p;
}

TEST(HalfVec, EncodesEveryRoundingCaseLikeHalfH) {
  const std::vector<uint32_t> patterns = float_patterns();
  for (size_t first = 0; first < patterns.size(); first += half_vec::kMaxChunk) {
    const int64_t n =
        static_cast<int64_t>(std::min<size_t>(half_vec::kMaxChunk, patterns.size() - first));
    std::vector<float> in(static_cast<size_t>(n));
    std::memcpy(in.data(), patterns.data() + first, in.size() * 4);
    std::vector<uint16_t> keep(in.size()), fast(in.size());
    half_vec::floats_to_halves<true>(in.data(), n, keep.data());
    half_vec::floats_to_halves<false>(in.data(), n, fast.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = float_to_half(in[static_cast<size_t>(i)]);
      ASSERT_EQ(keep[static_cast<size_t>(i)], want)
          << std::hex << patterns[first + static_cast<size_t>(i)];
      if (!std::isnan(in[static_cast<size_t>(i)])) {
        ASSERT_EQ(fast[static_cast<size_t>(i)], want);
      } else {
        ASSERT_EQ(fast[static_cast<size_t>(i)] & 0x7fff, 0x7c00);  // NaN -> infinity: still refused
      }
    }
  }
}

TEST(HalfVec, DecodesAllHalvesLikeHalfH) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  constexpr int64_t kStep = half_vec::kMaxChunk - 3;  // not a multiple of 16: tails too
  for (int64_t first = 0; first < 65536; first += kStep) {
    const int64_t n = std::min<int64_t>(kStep, 65536 - first);
    std::vector<float> out(static_cast<size_t>(n)), sum(static_cast<size_t>(n), 1.0f);
    half_vec::halves_to_floats(all.data() + first, n, out.data(), false);
    half_vec::halves_to_floats(all.data() + first, n, sum.data(), true);
    for (int64_t i = 0; i < n; ++i) {
      const float want = half_to_float(all[static_cast<size_t>(first + i)]);
      ASSERT_EQ(float_bits(out[static_cast<size_t>(i)]), float_bits(want)) << first + i;
      if (!std::isnan(want)) {
        ASSERT_EQ(float_bits(sum[static_cast<size_t>(i)]), float_bits(1.0f + want));
      }
    }
  }
}

TEST(Fp16Codec, PayloadIsHeaderThenRoundedHalves) {
  auto codec = make("fp16");
  std::vector<float> x = qtest::gradient(1000, 3, 10.0f);
  x[1] = 65504.0f;
  x[2] = 65519.0f;      // rounds down to 65504
  x[3] = 0x1p-24f;      // smallest subnormal
  x[4] = 0x1p-25f;      // tie: rounds to even (0)
  x[5] = 3 * 0x1p-25f;  // tie: rounds to 2^-23
  x[6] = -0.0f;
  std::vector<uint8_t> want = qtest::ref_header(CodecId::kFp16, TIDEGATE_FLOAT32, 1000);
  for (float v : x) {
    const uint16_t h = float_to_half(v);
    want.push_back(static_cast<uint8_t>(h));
    want.push_back(static_cast<uint8_t>(h >> 8));
  }
  const auto payload = encode(*codec, view_of(x));
  EXPECT_EQ(payload, want);
  EXPECT_EQ(payload.size(), codec->max_payload_bytes(view_of(x)));
  const auto back = decode(*codec, payload, 1000);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(float_bits(back[i]), float_bits(half_to_float(float_to_half(x[i]))));
  EXPECT_EQ(back[3], 0x1p-24f);
  EXPECT_EQ(back[4], 0.0f);
  EXPECT_EQ(back[5], 0x1p-23f);
  EXPECT_TRUE(codec->deterministic());
}

TEST(Fp16Codec, OverflowAndNonFiniteAreRefusedNamingTheElement) {
  auto codec = make("fp16");
  for (float bad : {65520.0f, -1e6f, std::numeric_limits<float>::infinity(), std::nanf("")}) {
    std::vector<float> x(5000, 1.0f);
    x[4097] = bad;
    x[4500] = bad;
    std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)));
    size_t written = 12345;
    const Status st = codec->encode(view_of(x), {}, out.data(), out.size(), &written);
    EXPECT_TRUE(is_error(st, TIDEGATE_ERR_INVALID_ARGUMENT)) << st.to_string();
    EXPECT_NE(st.message().find("element 4097"), std::string::npos) << st.message();
    EXPECT_EQ(written, 12345u);
  }
}

TEST(Bf16Codec, PayloadIsHeaderThenRoundedBfloats) {
  auto codec = make("bf16");
  std::vector<float> x = qtest::gradient(777, 5, 1e30f);
  x[0] = 1.00390625f;  // halfway between two bf16 values: ties to even
  x[1] = 1e-40f;       // subnormal
  std::vector<uint8_t> want = qtest::ref_header(CodecId::kBf16, TIDEGATE_FLOAT32, 777);
  for (float v : x) {
    const uint16_t b = float_to_bf16(v);
    want.push_back(static_cast<uint8_t>(b));
    want.push_back(static_cast<uint8_t>(b >> 8));
  }
  EXPECT_EQ(encode(*codec, view_of(x)), want);
  const auto back = decode(*codec, want, 777);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], bf16_to_float(float_to_bf16(x[i])));
  std::vector<float> huge = {3.4028235e38f};  // rounds up to infinity in bf16
  std::vector<uint8_t> out(codec->max_payload_bytes(view_of(huge)));
  size_t written = 0;
  EXPECT_TRUE(is_error(codec->encode(view_of(huge), {}, out.data(), out.size(), &written),
                       TIDEGATE_ERR_INVALID_ARGUMENT));
}

TEST(HalfCodecs, OtherInputAndOutputDtypes) {
  auto fp16 = make("fp16");
  std::vector<float> x = qtest::gradient(3001, 9, 100.0f);
  x[7] = 1.0f;
  std::vector<double> d(x.begin(), x.end());
  d[7] = 1.0 + 1e-12;  // rounds to float first
  std::vector<uint16_t> h(x.size()), b(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    h[i] = float_to_half(x[i]);
    b[i] = float_to_bf16(x[i]);
  }
  const auto from_float = encode(*fp16, view_of(x));
  const auto from_double = encode(*fp16, view_of(d, TIDEGATE_FLOAT64));
  EXPECT_EQ(std::vector<uint8_t>(from_float.begin() + 16, from_float.end()),
            std::vector<uint8_t>(from_double.begin() + 16, from_double.end()));
  const auto from_half = encode(*fp16, view_of(h, TIDEGATE_FLOAT16));  // exact round trip
  EXPECT_EQ(0, std::memcmp(from_half.data() + 16, h.data(), h.size() * 2));
  // Decoding into half and bfloat16 tensors: one rounding from the decoded float.
  std::vector<uint16_t> out16(x.size());
  ASSERT_TRUE(
      fp16->decode(from_float.data(), from_float.size(), view_of(out16, TIDEGATE_FLOAT16)).is_ok());
  EXPECT_EQ(out16, h);
  std::vector<double> outd(x.size(), 1.0);
  ASSERT_TRUE(
      fp16->decode_add(from_float.data(), from_float.size(), view_of(outd, TIDEGATE_FLOAT64))
          .is_ok());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(outd[i], 1.0 + static_cast<double>(half_to_float(h[i])));
  auto bf16 = make("bf16");
  const auto from_bf16 = encode(*bf16, view_of(b, TIDEGATE_BFLOAT16));
  EXPECT_EQ(0, std::memcmp(from_bf16.data() + 16, b.data(), b.size() * 2));
}

TEST(NoneCodec, CarriesRawBytesOfEveryDtype) {
  auto codec = make("none");
  std::vector<float> x = qtest::gradient(1025, 2);
  auto payload = encode(*codec, view_of(x));
  EXPECT_EQ(payload.size(), 16 + x.size() * 4);
  EXPECT_EQ(0, std::memcmp(payload.data() + 16, x.data(), x.size() * 4));
  EXPECT_EQ(decode(*codec, payload, 1025), x);
  std::vector<double> d = {1.0 / 3, -2.5, 1e300};
  std::vector<double> dout(3, 1.0);
  auto pd = encode(*codec, view_of(d, TIDEGATE_FLOAT64));
  ASSERT_TRUE(codec->decode_add(pd.data(), pd.size(), view_of(dout, TIDEGATE_FLOAT64)).is_ok());
  EXPECT_EQ(dout[0], 1.0 + 1.0 / 3);
  EXPECT_EQ(dout[2], 1e300);
  std::vector<uint16_t> h = {float_to_half(1.5f), float_to_half(-2.0f)},
                        hout(2, float_to_half(0.25f));
  auto ph = encode(*codec, view_of(h, TIDEGATE_FLOAT16));
  ASSERT_TRUE(codec->decode_add(ph.data(), ph.size(), view_of(hout, TIDEGATE_FLOAT16)).is_ok());
  EXPECT_EQ(half_to_float(hout[0]), 1.75f);
  EXPECT_EQ(half_to_float(hout[1]), -1.75f);
  // Raw elements need the same dtype on both sides.
  std::vector<float> wrong(2);
  EXPECT_TRUE(is_error(codec->decode(ph.data(), ph.size(), view_of(wrong)), TIDEGATE_ERR_PROTOCOL));
}

TEST(NoneCodec, NonFiniteInputOfEachDtypeIsRefused) {
  auto codec = make("none");
  std::vector<uint16_t> h(20000, float_to_half(1.0f));
  h[19999] = 0x7c00;
  std::vector<uint8_t> out(codec->max_payload_bytes(view_of(h, TIDEGATE_FLOAT16)));
  size_t written = 0;
  Status st = codec->encode(view_of(h, TIDEGATE_FLOAT16), {}, out.data(), out.size(), &written);
  EXPECT_TRUE(is_error(st, TIDEGATE_ERR_INVALID_ARGUMENT));
  EXPECT_NE(st.message().find("element 19999"), std::string::npos) << st.message();
  std::vector<uint16_t> b(10, float_to_bf16(2.0f));
  b[3] = 0xffc0;  // bf16 NaN
  st = codec->encode(view_of(b, TIDEGATE_BFLOAT16), {}, out.data(), out.size(), &written);
  EXPECT_NE(st.message().find("element 3"), std::string::npos) << st.message();
  std::vector<double> d(10, 1.0);
  d[9] = -std::numeric_limits<double>::infinity();
  st = codec->encode(view_of(d, TIDEGATE_FLOAT64), {}, out.data(), out.size(), &written);
  EXPECT_NE(st.message().find("element 9"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tidegate
