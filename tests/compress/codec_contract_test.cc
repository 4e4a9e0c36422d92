// The Codec contract checked for every quantiser configuration: dtypes, small counts, threads,
// the non-finite policy, input validation, sizes beyond 2^31 elements, and malformed payloads
// (truncated at every length, wrong fields) rejected as PROTOCOL errors without reading out of
// bounds or touching the output.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compress/float_io.h"
#include "compress/payload.h"
#include "numeric/half.h"
#include "quantiser_test_util.h"

namespace tidegate {
namespace {

using namespace qtest;

const char* const kSpecs[] = {"none",
                              "fp16",
                              "bf16",
                              "qsgd:bits=2,bucket=64",
                              "qsgd:bits=8,bucket=512",
                              "maxmin:bits=3,bucket=64",
                              "maxmin:bits=8,bucket=512,rounding=nearest",
                              "terngrad:bucket=64",
                              "signsgd",
                              "efsign",
                              "onebit:bucket=64"};

Status encode_status(const Codec& codec, const TensorView& t, size_t* written = nullptr) {
  std::vector<uint8_t> out(t.count >= 0 ? codec.max_payload_bytes(t) + 1 : 64);
  size_t w = written != nullptr ? *written : 0;
  Status st = codec.encode(t, {}, out.data(), out.size(), &w);
  if (written != nullptr) *written = w;
  return st;
}

TEST(CodecContract, EveryDtypeAndSmallCountRoundTrips) {
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    for (int64_t n : {0, 1, 7, 8, 9, 65}) {
      std::vector<float> f = gradient(n, 3, 2.0f);
      std::vector<double> d(f.begin(), f.end());
      std::vector<uint16_t> h(f.size()), b(f.size());
      for (size_t i = 0; i < f.size(); ++i) h[i] = float_to_half(f[i]), b[i] = float_to_bf16(f[i]);
      const TensorView views[] = {view_of(f), view_of(d, TIDEGATE_FLOAT64),
                                  view_of(h, TIDEGATE_FLOAT16), view_of(b, TIDEGATE_BFLOAT16)};
      for (const TensorView& v : views) {
        const auto payload = encode(*codec, v, 1);
        ASSERT_EQ(payload.size(), codec->max_payload_bytes(v))
            << spec << " " << dtype_name(v.dtype);
        std::vector<uint8_t> out(v.bytes() + 8, 0xaa);
        TensorView o = v;
        o.data = out.data();
        ASSERT_TRUE(codec->decode(payload.data(), payload.size(), o).is_ok())
            << spec << " " << dtype_name(v.dtype);
        ASSERT_EQ(out[v.bytes()], 0xaa) << "decode wrote past the tensor";
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(element_value(o, i))) << spec;
      }
      if (n == 0) {
        std::vector<float> none;
        TensorView empty = view_of(none);
        empty.data = nullptr;
        ASSERT_TRUE(encode_status(*codec, empty).is_ok()) << spec;
      }
    }
  }
}

TEST(CodecContract, PayloadsDoNotDependOnThreads) {
  std::vector<float> x = gradient(1'500'001, 21);
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    const auto one = encode(*codec, view_of(x), 77, 1);
    EXPECT_EQ(one, encode(*codec, view_of(x), 77, 2)) << spec;
    EXPECT_EQ(one, encode(*codec, view_of(x), 77, 7)) << spec;
  }
}

TEST(CodecContract, NonFiniteInputIsRefusedNamingTheFirstBadElement) {
  const float bads[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    for (float bad : bads) {
      for (int64_t at : {0, 63, 64, 4096, 9999}) {
        std::vector<float> x = gradient(10000, 4);
        x[at] = bad;
        if (at < 9999) x[9999] = bad;  // a later bad element must not be the one reported
        size_t written = 777;
        const Status st = encode_status(*codec, view_of(x), &written);
        ASSERT_TRUE(is_error(st, TIDEGATE_ERR_INVALID_ARGUMENT)) << spec << " " << st.to_string();
        ASSERT_NE(st.message().find("element " + std::to_string(at) + " "), std::string::npos)
            << spec << " at " << at << ": " << st.message();
        ASSERT_EQ(written, 777u) << "written must not be set on error";
      }
    }
    std::vector<uint16_t> h(100, float_to_half(1.0f));
    h[42] = 0x7e00;
    const Status st = encode_status(*codec, view_of(h, TIDEGATE_FLOAT16));
    EXPECT_NE(st.message().find("element 42 "), std::string::npos) << spec << ": " << st.message();
    std::vector<double> d(100, 1.0);
    d[17] = 1e300;  // finite, but not representable in float32
    EXPECT_TRUE(is_error(encode_status(*codec, view_of(d, TIDEGATE_FLOAT64)),
                         TIDEGATE_ERR_INVALID_ARGUMENT) ||
                std::string(spec) == "none")
        << spec;
  }
}

TEST(CodecContract, HugeFiniteBucketsAreRefusedNotPropagated) {
  std::vector<float> x = {3e38f, -3e38f, 1.0f, 2.0f, 0, 0, 0, 0};
  EXPECT_TRUE(is_error(encode_status(*make("maxmin:bits=4,bucket=8"), view_of(x)),
                       TIDEGATE_ERR_INVALID_ARGUMENT));
  EXPECT_TRUE(is_error(encode_status(*make("qsgd:bits=4,bucket=8"), view_of(x)),
                       TIDEGATE_ERR_INVALID_ARGUMENT));
  for (const char* spec : {"terngrad:bucket=8", "onebit:bucket=8", "efsign", "signsgd", "bf16"}) {
    auto codec = make(spec);
    const auto y = decode(*codec, encode(*codec, view_of(x)), 8);
    for (float v : y) EXPECT_TRUE(std::isfinite(v)) << spec;
  }
}

TEST(CodecContract, SubnormalInputsQuantiseToFiniteValues) {
  std::vector<float> x(300);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 1e-45f;
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    const auto y = decode(*codec, encode(*codec, view_of(x), 3), 300);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << spec;
      if (std::string(spec) != "signsgd") {
        ASSERT_LE(std::fabs(y[i]), 1e-43f) << spec << " " << i;
      }
    }
  }
}

TEST(CodecContract, InvalidArgumentsAreRejected) {
  std::vector<float> x(16, 1.0f);
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    TensorView v = view_of(x);
    v.memory = TIDEGATE_MEMORY_CUDA;
    EXPECT_TRUE(is_error(encode_status(*codec, v), TIDEGATE_ERR_UNSUPPORTED)) << spec;
    v = view_of(x);
    v.dtype = TIDEGATE_INT32;
    EXPECT_TRUE(is_error(encode_status(*codec, v), TIDEGATE_ERR_UNSUPPORTED)) << spec;
    v = view_of(x);
    v.count = -1;
    EXPECT_FALSE(encode_status(*codec, v).is_ok()) << spec;
    v = view_of(x);
    v.data = nullptr;
    EXPECT_TRUE(is_error(encode_status(*codec, v), TIDEGATE_ERR_INVALID_ARGUMENT)) << spec;
    std::vector<uint8_t> small(codec->max_payload_bytes(view_of(x)) - 1);
    size_t written = 0;
    EXPECT_TRUE(is_error(codec->encode(view_of(x), {}, small.data(), small.size(), &written),
                         TIDEGATE_ERR_INVALID_ARGUMENT))
        << spec;
  }
}

TEST(CodecContract, SizesBeyondTwoToTheThirtyOneAreExact) {
  for (int64_t n : {(int64_t{1} << 31) + 3, (int64_t{1} << 33) + 5}) {
    TensorView like;
    like.count = n;
    const uint64_t u = static_cast<uint64_t>(n);
    EXPECT_EQ(make("none")->max_payload_bytes(like), 16 + 4 * u);
    EXPECT_EQ(make("fp16")->max_payload_bytes(like), 16 + 2 * u);
    EXPECT_EQ(make("signsgd")->max_payload_bytes(like), 16 + 8 + (u + 7) / 8);
    EXPECT_EQ(make("efsign")->max_payload_bytes(like), 16 + 8 + (u + 7) / 8);
    EXPECT_EQ(make("qsgd:bits=4,bucket=512")->max_payload_bytes(like),
              16 + 8 + (u + 511) / 512 * 4 + (u * 4 + 7) / 8);
    EXPECT_EQ(make("maxmin:bits=3,bucket=64")->max_payload_bytes(like),
              16 + 8 + (u + 63) / 64 * 8 + (u * 3 + 7) / 8);
    // 1000 voters: counts of 10 bits, as 10 bit planes of ceil(n / 8) bytes
    EXPECT_EQ(make("signsgd")->max_summed_payload_bytes(like, 1000), 16 + 8 + 10 * ((u + 7) / 8));
  }
}

// A valid payload for each codec, then every kind of damage.
TEST(CodecContract, MalformedPayloadsAreProtocolErrorsAndLeaveTheOutputAlone) {
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    std::vector<float> x = gradient(37, 8);
    const auto good = encode(*codec, view_of(x), 4);
    std::vector<float> out(37, 3.0f);
    auto expect_rejected = [&](const std::vector<uint8_t>& payload, int64_t count,
                               const std::string& what) {
      std::vector<float> o(static_cast<size_t>(count), 3.0f);
      // Copy to an exactly sized heap block so that ASan sees any read past its end.
      std::unique_ptr<uint8_t[]> exact(new uint8_t[payload.size() + (payload.empty() ? 1 : 0)]);
      if (!payload.empty()) std::memcpy(exact.get(), payload.data(), payload.size());
      TensorView v = view_of(o);
      const Status a = codec->decode(exact.get(), payload.size(), v);
      const Status b = codec->decode_add(exact.get(), payload.size(), v);
      ASSERT_TRUE(is_error(a, TIDEGATE_ERR_PROTOCOL))
          << spec << " " << what << ": " << a.to_string();
      ASSERT_TRUE(is_error(b, TIDEGATE_ERR_PROTOCOL)) << spec << " " << what;
      ASSERT_EQ(o, std::vector<float>(static_cast<size_t>(count), 3.0f)) << spec << " " << what;
    };
    for (size_t len = 0; len < good.size(); ++len) {
      expect_rejected(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<int64_t>(len)),
                      37, "truncated to " + std::to_string(len));
    }
    auto longer = good;
    longer.push_back(0);
    expect_rejected(longer, 37, "one extra byte");
    auto damaged = good;
    damaged[0] ^= 1;
    expect_rejected(damaged, 37, "bad magic");
    damaged = good;
    damaged[2] = 2;
    expect_rejected(damaged, 37, "version 2");
    damaged = good;
    damaged[3] =
        static_cast<uint8_t>(codec->id() == CodecId::kQsgd ? CodecId::kMaxMin : CodecId::kQsgd);
    expect_rejected(damaged, 37, "another codec");
    expect_rejected(good, 36, "count 36");
    expect_rejected(good, 38, "count 38");
    damaged = good;
    const int64_t huge = int64_t{1} << 62;
    std::memcpy(damaged.data() + 8, &huge, 8);
    expect_rejected(damaged, 37, "count 2^62");
    if (good.size() > 24 && codec->id() != CodecId::kNone && codec->id() != CodecId::kFp16 &&
        codec->id() != CodecId::kBf16) {
      damaged = good;
      damaged[16] ^= 0x40;  // first parameter byte: bits / voters / scale
      if (codec->id() != CodecId::kEfSign) expect_rejected(damaged, 37, "parameter");
      damaged = good;
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const size_t scale_at = codec->id() == CodecId::kEfSign ? 16 : 24;
      if (codec->id() != CodecId::kSignSgd) {
        std::memcpy(damaged.data() + scale_at, &nan, 4);
        expect_rejected(damaged, 37, "NaN scale");
      }
    }
    // A payload of another codec.
    auto other = encode(*make(codec->id() == CodecId::kSignSgd ? "efsign" : "signsgd"), view_of(x));
    expect_rejected(other, 37, "payload of another codec");
    EXPECT_TRUE(codec->decode(good.data(), good.size(), view_of(out)).is_ok()) << spec;
  }
}

}  // namespace
}  // namespace tidegate
