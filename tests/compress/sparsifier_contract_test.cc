// The Codec contract for the sparsifiers and PowerSGD, checked per configuration as
// codec_contract_test.cc does for the quantisers: every floating dtype and small counts, input
// validation, exact bounds past 2^31 elements, malformed payloads (PROTOCOL, output untouched,
// no read past the payload), and the error-feedback invariant through ResidualStore.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compress/error_feedback.h"
#include "compress/float_io.h"
#include "compress/sparse_payload.h"
#include "numeric/half.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

struct Config {
  const char* spec;
  bool matrix;  // PowerSGD: the tensor is 2-D (rows chosen below)
};

const Config kConfigs[] = {{"topk:ratio=0.2", false},      {"topk:k=3,mode=approx", false},
                           {"randomk:ratio=0.3", false},   {"randomk:k=2,unbiased=1", false},
                           {"threshold:value=0.5", false}, {"powersgd:rank=2", true}};

// n elements, shaped rows x cols for matrix codecs (a column when n is prime).
TensorView shaped(TensorView v, bool matrix) {
  if (!matrix || v.count == 0) return v;
  int64_t rows = 1;
  for (int64_t r = 2; r * r <= v.count; ++r) {
    if (v.count % r == 0) rows = r;
  }
  v.rows = rows;
  v.cols = v.count / rows;
  return v;
}

template <typename T>
TensorView typed_view(std::vector<T>& v, tidegate_dtype_t dtype, bool matrix) {
  TensorView t;
  t.data = v.empty() ? nullptr : v.data();
  t.count = static_cast<int64_t>(v.size());
  t.dtype = dtype;
  return shaped(t, matrix);
}

TEST(SparsifierContract, EveryDtypeAndSmallCountRoundTrips) {
  for (const Config& c : kConfigs) {
    auto codec = codec_from(c.spec);
    for (int64_t n : {0, 1, 7, 8, 9, 65, 96}) {
      std::vector<float> f = normal_floats(static_cast<size_t>(n), 3);
      std::vector<double> d(f.begin(), f.end());
      std::vector<uint16_t> h(f.size()), b(f.size());
      for (size_t i = 0; i < f.size(); ++i) h[i] = float_to_half(f[i]), b[i] = float_to_bf16(f[i]);
      const TensorView views[] = {
          typed_view(f, TIDEGATE_FLOAT32, c.matrix), typed_view(d, TIDEGATE_FLOAT64, c.matrix),
          typed_view(h, TIDEGATE_FLOAT16, c.matrix), typed_view(b, TIDEGATE_BFLOAT16, c.matrix)};
      for (const TensorView& v : views) {
        std::vector<uint8_t> payload(codec->max_payload_bytes(v));
        size_t written = 0;
        EncodeContext context;
        context.seed = 5;
        ASSERT_TRUE(codec->encode(v, context, payload.data(), payload.size(), &written).is_ok())
            << c.spec << " n=" << n << " " << dtype_name(v.dtype);
        std::vector<uint8_t> out(v.bytes() + 8, 0xaa);
        TensorView o = v;
        o.data = out.data();
        ASSERT_TRUE(codec->decode(payload.data(), written, o).is_ok())
            << c.spec << " " << dtype_name(v.dtype);
        ASSERT_EQ(out[v.bytes()], 0xaa) << "decode wrote past the tensor";
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(element_value(o, i))) << c.spec;
        ASSERT_TRUE(codec->decode_add(payload.data(), written, o).is_ok()) << c.spec;
      }
    }
  }
}

TEST(SparsifierContract, InvalidArgumentsAreRejected) {
  std::vector<float> x = normal_floats(64, 4);
  for (const Config& c : kConfigs) {
    auto codec = codec_from(c.spec);
    const TensorView good = shaped(view_of(x), c.matrix);
    auto status_of = [&](const TensorView& v, size_t capacity) {
      std::vector<uint8_t> out(capacity);
      size_t written = 0;
      return codec->encode(v, EncodeContext(), out.data(), out.size(), &written).code();
    };
    const size_t bound = codec->max_payload_bytes(good);
    TensorView v = good;
    v.memory = TIDEGATE_MEMORY_CUDA;
    EXPECT_EQ(status_of(v, bound), TIDEGATE_ERR_UNSUPPORTED) << c.spec;
    v = good;
    v.dtype = TIDEGATE_INT32;
    EXPECT_EQ(status_of(v, bound), TIDEGATE_ERR_UNSUPPORTED) << c.spec;
    v = good;
    v.count = -1;
    EXPECT_NE(status_of(v, bound), TIDEGATE_OK) << c.spec;
    v = good;
    v.data = nullptr;
    EXPECT_EQ(status_of(v, bound), TIDEGATE_ERR_INVALID_ARGUMENT) << c.spec;
    EXPECT_EQ(status_of(good, bound - 1), TIDEGATE_ERR_INVALID_ARGUMENT) << c.spec;
  }
}

TEST(SparsifierContract, BoundsBeyondTwoToTheThirtyOneAreExact) {
  for (int64_t n : {(int64_t{1} << 31) + 3, (int64_t{1} << 33) + 5}) {
    TensorView like;
    like.count = n;
    const auto u = static_cast<size_t>(n);
    const size_t k = static_cast<size_t>(std::llround(0.01 * static_cast<double>(n)));
    const size_t bits = n > (int64_t{1} << 32) ? 34 : 32;
    EXPECT_EQ(codec_from("topk:ratio=0.01")->max_payload_bytes(like),
              kSparsePrefixBytes + (k * bits + 7) / 8 + 4 * k);
    EXPECT_EQ(codec_from("randomk:ratio=0.01")->max_payload_bytes(like), 32 + 4 * k);
    EXPECT_EQ(codec_from("threshold")->max_payload_bytes(like), kSparsePrefixBytes + 4 * u);
  }
  // PowerSGD: 64 x (2^27 + 1) at rank 4 sends 4 (64 + cols) floats; a 1 x n row goes dense.
  TensorView matrix;
  matrix.rows = 64;
  matrix.cols = (int64_t{1} << 27) + 1;
  matrix.count = matrix.rows * matrix.cols;
  EXPECT_EQ(codec_from("powersgd:rank=4")->max_payload_bytes(matrix),
            33 + 4 * 4 * (64 + static_cast<size_t>(matrix.cols)));
  matrix.rows = 1;
  matrix.cols = matrix.count;
  EXPECT_EQ(codec_from("powersgd:rank=4")->max_payload_bytes(matrix),
            33 + 4 * static_cast<size_t>(matrix.count));
}

TEST(SparsifierContract, MalformedPayloadsAreProtocolErrorsAndLeaveTheOutputAlone) {
  for (const Config& c : kConfigs) {
    auto codec = codec_from(c.spec);
    std::vector<float> x = normal_floats(36, 8);
    const TensorView in = shaped(view_of(x), c.matrix);
    const auto good = encode_ok(*codec, in, 4);
    auto expect_rejected = [&](const std::vector<uint8_t>& payload, int64_t count,
                               const std::string& what) {
      std::vector<float> o(static_cast<size_t>(count), 3.0f);
      // An exactly sized heap block, so that ASan sees any read past its end.
      std::unique_ptr<uint8_t[]> exact(new uint8_t[payload.size() + 1]);
      if (!payload.empty()) std::memcpy(exact.get(), payload.data(), payload.size());
      TensorView v = shaped(view_of(o), c.matrix && count == 36);
      EXPECT_EQ(codec->decode(exact.get(), payload.size(), v).code(), TIDEGATE_ERR_PROTOCOL)
          << c.spec << " " << what;
      EXPECT_EQ(codec->decode_add(exact.get(), payload.size(), v).code(), TIDEGATE_ERR_PROTOCOL)
          << c.spec << " " << what;
      EXPECT_EQ(o, std::vector<float>(static_cast<size_t>(count), 3.0f)) << c.spec << " " << what;
    };
    for (size_t len = 0; len < good.size(); ++len) {
      expect_rejected(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<int64_t>(len)),
                      36, "truncated to " + std::to_string(len));
    }
    auto damaged = good;
    damaged.push_back(0);
    expect_rejected(damaged, 36, "one extra byte");
    damaged = good;
    damaged[0] ^= 1;
    expect_rejected(damaged, 36, "bad magic");
    damaged = good;
    damaged[2] = 2;
    expect_rejected(damaged, 36, "version 2");
    damaged = good;
    damaged[3] =
        static_cast<uint8_t>(codec->id() == CodecId::kTopK ? CodecId::kQsgd : CodecId::kTopK);
    expect_rejected(damaged, 36, "another codec");
    expect_rejected(good, 35, "count 35");
  }
}

TEST(SparsifierContract, ErrorFeedbackSentPlusResidualEqualsInput) {
  for (const Config& c : kConfigs) {
    auto codec = codec_from(c.spec);
    ResidualStore store;
    std::vector<double> previous(96, 0.0);
    for (int step = 0; step < 4; ++step) {
      std::vector<float> x = normal_floats(96, 10 + static_cast<uint32_t>(step));
      const TensorView in = shaped(view_of(x), c.matrix);
      std::vector<uint8_t> payload(codec->max_payload_bytes(in));
      size_t written = 0;
      EncodeContext context;
      context.seed = static_cast<uint64_t>(step);
      ASSERT_TRUE(store
                      .encode_with_feedback(*codec, 7, in, context, payload.data(), payload.size(),
                                            &written)
                      .is_ok())
          << c.spec;
      payload.resize(written);
      const std::vector<float> sent = decode_ok(*codec, payload, 96, in.rows, in.cols);
      std::vector<double> residual;
      ASSERT_TRUE(store.residual(7, &residual).is_ok());
      for (size_t i = 0; i < sent.size(); ++i) {
        ASSERT_NEAR(sent[i] + residual[i], x[i] + previous[i], 1e-5)
            << c.spec << " step " << step << " element " << i;
      }
      previous = residual;
    }
    EXPECT_TRUE(codec->wants_error_feedback() ||
                std::string(c.spec).find("unbiased=1") != std::string::npos)
        << c.spec;
  }
}

}  // namespace
}  // namespace tidegate
