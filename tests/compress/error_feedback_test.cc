// ResidualStore: the invariant sent + residual == input + previous residual, flush, reset,
// errors leaving the residual untouched, and save/load (round trip and hostile buffers).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compress/error_feedback.h"
#include "numeric/half.h"
#include "quantiser_test_util.h"

namespace tidegate {
namespace {

using namespace qtest;

const char* const kSpecs[] = {"none",
                              "fp16",
                              "bf16",
                              "qsgd:bits=2,bucket=64",
                              "maxmin:bits=2,bucket=128",
                              "maxmin:bits=4,bucket=512,rounding=nearest",
                              "terngrad:bucket=64",
                              "signsgd",
                              "efsign",
                              "onebit:bucket=64"};

std::vector<double> residual_of(const ResidualStore& store, uint64_t key) {
  std::vector<double> r;
  EXPECT_TRUE(store.residual(key, &r).is_ok());
  return r;
}

Status step(ResidualStore& store, const Codec& codec, uint64_t key, std::vector<float>& x,
            std::vector<uint8_t>* payload, uint64_t seed = 1) {
  payload->assign(codec.max_payload_bytes(view_of(x)), 0);
  size_t written = 0;
  EncodeContext context;
  context.seed = seed;
  Status st = store.encode_with_feedback(codec, key, view_of(x), context, payload->data(),
                                         payload->size(), &written);
  if (st.is_ok()) payload->resize(written);
  return st;
}

TEST(ErrorFeedback, SentPlusResidualEqualsInputPlusPreviousResidual) {
  for (const char* spec : kSpecs) {
    auto codec = make(spec);
    ResidualStore store;
    std::vector<double> previous(3000, 0.0);
    for (int iteration = 0; iteration < 4; ++iteration) {
      std::vector<float> x = gradient(3000, 50 + static_cast<uint64_t>(iteration));
      std::vector<uint8_t> payload;
      ASSERT_TRUE(step(store, *codec, 9, x, &payload, static_cast<uint64_t>(iteration)).is_ok())
          << spec;
      const auto sent = decode(*codec, payload, 3000);
      const auto residual = residual_of(store, 9);
      for (size_t i = 0; i < x.size(); ++i) {
        const double in = static_cast<double>(x[i]) + previous[i];
        const double tolerance = 1e-6 * (std::fabs(in) + std::fabs(sent[i])) + 1e-12;
        ASSERT_NEAR(sent[i] + residual[i], in, tolerance)
            << spec << " iteration " << iteration << " element " << i;
      }
      previous = residual;
    }
  }
}

TEST(ErrorFeedback, SignCodecsCarryTheirErrorForward) {
  // With error feedback, the sum of what signsgd sends over many steps tracks the sum of
  // the inputs: |sum(sent) - sum(input)| = |residual|, which stays bounded.
  auto codec = make("efsign");
  ResidualStore store;
  std::vector<double> sent_total(512, 0.0), input_total(512, 0.0);
  for (int t = 0; t < 200; ++t) {
    std::vector<float> x = gradient(512, 1000 + static_cast<uint64_t>(t), 1.0f);
    std::vector<uint8_t> payload;
    ASSERT_TRUE(step(store, *codec, 1, x, &payload).is_ok());
    const auto sent = decode(*codec, payload, 512);
    for (size_t i = 0; i < x.size(); ++i) sent_total[i] += sent[i], input_total[i] += x[i];
  }
  const auto residual = residual_of(store, 1);
  for (size_t i = 0; i < 512; ++i) {
    EXPECT_NEAR(sent_total[i] + residual[i], input_total[i], 1e-3);
    EXPECT_LT(std::fabs(residual[i]), 10.0);
  }
}

TEST(ErrorFeedback, FlushAddsTheResidualIntoADenseSendAndClearsIt) {
  auto codec = make("signsgd");
  ResidualStore store;
  std::vector<float> x = gradient(100, 3);
  std::vector<uint8_t> payload;
  ASSERT_TRUE(step(store, *codec, 5, x, &payload).is_ok());
  const auto residual = residual_of(store, 5);
  std::vector<float> dense = gradient(100, 4);
  const std::vector<float> before = dense;
  ASSERT_TRUE(store.flush(5, view_of(dense)).is_ok());
  for (size_t i = 0; i < dense.size(); ++i)
    EXPECT_EQ(dense[i], before[i] + static_cast<float>(residual[i]));
  for (double r : residual_of(store, 5)) EXPECT_EQ(r, 0.0);
  ASSERT_TRUE(store.flush(77, view_of(dense)).is_ok()) << "no residual: nothing to do";
  std::vector<float> wrong(99);
  EXPECT_TRUE(is_error(store.flush(5, view_of(wrong)), TIDEGATE_ERR_INVALID_ARGUMENT));
  store.reset(5);
  EXPECT_FALSE(store.has(5));
  EXPECT_EQ(store.keys(), 0u);
}

TEST(ErrorFeedback, ErrorsLeaveTheResidualUntouched) {
  auto codec = make("maxmin:bits=2,bucket=64");
  ResidualStore store;
  std::vector<float> x = gradient(1000, 6);
  std::vector<uint8_t> payload;
  ASSERT_TRUE(step(store, *codec, 2, x, &payload).is_ok());
  const auto residual = residual_of(store, 2);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3e38f}) {
    std::vector<float> y = gradient(1000, 7);
    y[500] = bad;
    y[501] = bad == 3e38f ? -3e38f : bad;
    const Status st = step(store, *codec, 2, y, &payload);
    EXPECT_TRUE(is_error(st, TIDEGATE_ERR_INVALID_ARGUMENT)) << st.to_string();
    EXPECT_NE(st.message().find("tensor key 2"), std::string::npos) << st.message();
    EXPECT_EQ(residual_of(store, 2), residual);
  }
  std::vector<float> shorter(999);
  EXPECT_TRUE(is_error(step(store, *codec, 2, shorter, &payload), TIDEGATE_ERR_INVALID_ARGUMENT));
  EXPECT_EQ(residual_of(store, 2), residual);
  // A failed first step creates no residual.
  std::vector<float> nan(10, std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(step(store, *codec, 3, nan, &payload).is_ok());
  EXPECT_FALSE(store.has(3));
}

TEST(ErrorFeedback, HalfAndDoubleTensors) {
  auto codec = make("qsgd:bits=2,bucket=64");
  ResidualStore store;
  std::vector<float> f = gradient(700, 12);
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) h[i] = float_to_half(f[i]);
  std::vector<uint8_t> payload(codec->max_payload_bytes(view_of(h, TIDEGATE_FLOAT16)));
  size_t written = 0;
  ASSERT_TRUE(store
                  .encode_with_feedback(*codec, 1, view_of(h, TIDEGATE_FLOAT16), {}, payload.data(),
                                        payload.size(), &written)
                  .is_ok());
  std::vector<uint16_t> sent(h.size());
  ASSERT_TRUE(codec->decode(payload.data(), written, view_of(sent, TIDEGATE_FLOAT16)).is_ok());
  const auto r = residual_of(store, 1);
  for (size_t i = 0; i < h.size(); ++i) {
    ASSERT_NEAR(half_to_float(sent[i]) + r[i], half_to_float(h[i]), 1e-6);
  }
  std::vector<double> d(f.begin(), f.end());
  d[0] = 0.1;  // not a float: the f64 residual keeps the difference
  auto none = make("none");
  payload.assign(none->max_payload_bytes(view_of(d, TIDEGATE_FLOAT64)), 0);
  ASSERT_TRUE(store
                  .encode_with_feedback(*none, 2, view_of(d, TIDEGATE_FLOAT64), {}, payload.data(),
                                        payload.size(), &written)
                  .is_ok());
  for (double v : residual_of(store, 2)) EXPECT_EQ(v, 0.0);
  std::vector<float> as_float(d.size());
  EXPECT_TRUE(is_error(store.encode_with_feedback(*none, 2, view_of(as_float), {}, payload.data(),
                                                  payload.size(), &written),
                       TIDEGATE_ERR_INVALID_ARGUMENT));
}

TEST(ErrorFeedback, SaveAndLoadRoundTrip) {
  ResidualStore store;
  auto codec = make("onebit:bucket=64");
  for (uint64_t key : {uint64_t{3}, uint64_t{1}, ~uint64_t{0}}) {
    std::vector<float> x = gradient(100 + static_cast<int64_t>(key % 7), key);
    std::vector<uint8_t> payload;
    ASSERT_TRUE(step(store, *codec, key, x, &payload).is_ok());
  }
  std::vector<double> d(5, 0.5);
  std::vector<uint8_t> payload(make("fp16")->max_payload_bytes(view_of(d, TIDEGATE_FLOAT64)));
  size_t written = 0;
  ASSERT_TRUE(store
                  .encode_with_feedback(*make("fp16"), 8, view_of(d, TIDEGATE_FLOAT64), {},
                                        payload.data(), payload.size(), &written)
                  .is_ok());
  std::vector<uint8_t> saved;
  ASSERT_TRUE(store.save(&saved).is_ok());
  ResidualStore loaded;
  ASSERT_TRUE(loaded.load(saved.data(), saved.size()).is_ok());
  EXPECT_EQ(loaded.keys(), 4u);
  for (uint64_t key : {uint64_t{3}, uint64_t{1}, ~uint64_t{0}, uint64_t{8}}) {
    EXPECT_EQ(residual_of(loaded, key), residual_of(store, key)) << key;
  }
  std::vector<uint8_t> again;
  ASSERT_TRUE(loaded.save(&again).is_ok());
  EXPECT_EQ(again, saved) << "same state, same bytes";
  ResidualStore empty;
  ASSERT_TRUE(empty.save(&again).is_ok());
  EXPECT_EQ(again.size(), 16u);
}

TEST(ErrorFeedback, LoadRejectsDamagedBuffersAndKeepsTheStore) {
  ResidualStore store;
  std::vector<float> x = gradient(40, 1);
  std::vector<uint8_t> payload, saved;
  auto codec = make("signsgd");
  ASSERT_TRUE(step(store, *codec, 4, x, &payload).is_ok());
  ASSERT_TRUE(step(store, *codec, 6, x, &payload).is_ok());
  ASSERT_TRUE(store.save(&saved).is_ok());
  ResidualStore target;
  ASSERT_TRUE(step(target, *codec, 99, x, &payload).is_ok());
  const auto kept = residual_of(target, 99);
  auto expect_rejected = [&](const std::vector<uint8_t>& buffer, const std::string& what) {
    std::unique_ptr<uint8_t[]> exact(new uint8_t[buffer.size() + 1]);
    if (!buffer.empty()) std::memcpy(exact.get(), buffer.data(), buffer.size());
    const Status st = target.load(exact.get(), buffer.size());
    ASSERT_TRUE(is_error(st, TIDEGATE_ERR_INVALID_ARGUMENT)) << what << ": " << st.to_string();
    ASSERT_EQ(target.keys(), 1u) << what;
    ASSERT_EQ(residual_of(target, 99), kept) << what;
  };
  for (size_t len = 0; len < saved.size(); ++len) {
    expect_rejected(std::vector<uint8_t>(saved.begin(), saved.begin() + static_cast<int64_t>(len)),
                    "truncated");
  }
  auto damaged = saved;
  damaged.push_back(0);
  expect_rejected(damaged, "trailing byte");
  damaged = saved;
  damaged[4] = 2;
  expect_rejected(damaged, "version 2");
  damaged = saved;
  damaged[0] ^= 1;
  expect_rejected(damaged, "magic");
  damaged = saved;
  damaged[8] = 0xff;  // entry count far beyond the buffer
  expect_rejected(damaged, "entry count");
  damaged = saved;
  const int64_t huge = int64_t{1} << 61;
  std::memcpy(damaged.data() + 16 + 16, &huge, 8);  // first entry's count
  expect_rejected(damaged, "huge count");
  damaged = saved;
  damaged[16 + 8] = 2;  // dtype float16 is not a residual precision
  expect_rejected(damaged, "dtype");
  damaged = saved;
  std::memcpy(damaged.data() + 16 + 24 + 40 * 4 + 0, damaged.data() + 16,
              8);  // second key = first key
  expect_rejected(damaged, "duplicate key");
  damaged = saved;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(damaged.data() + 16 + 24, &nan, 4);
  expect_rejected(damaged, "NaN residual");
  ASSERT_TRUE(target.load(saved.data(), saved.size()).is_ok());
  EXPECT_EQ(target.keys(), 2u);
}

}  // namespace
}  // namespace tidegate
