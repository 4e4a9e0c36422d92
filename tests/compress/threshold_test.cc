// Threshold: keeps exactly { i : |x_i| >= value } in each of the three layouts.
#include <gtest/gtest.h>

#include <limits>

#include "compress/sparse_payload.h"
#include "compress/threshold.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

TEST(Threshold, KeepsExactlyTheElementsAtOrAboveTheValue) {
  std::vector<float> x = normal_floats(100000, 1);
  x[10] = 0.5f;  // exactly at a threshold below: kept
  x[11] = -0.5f;
  // 3.0 keeps ~0.3% (index layout), 1.5 ~13% (bitmap), 0.5 ~62% (bitmap), 0.01 ~99% (dense).
  for (float value : {3.0f, 1.5f, 0.5f, 0.01f, 0.0f}) {
    auto codec = codec_from("threshold:value=" + std::to_string(value));
    const auto payload = encode_ok(*codec, view_of(x));
    std::vector<float> y = decode_ok(*codec, payload, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(y[i], std::fabs(x[i]) >= value ? x[i] : 0.0f)
          << "value " << value << " element " << i;
    }
    EXPECT_LE(payload.size(), codec->max_payload_bytes(view_of(x)));
  }
}

TEST(Threshold, PicksTheSmallestLayout) {
  std::vector<float> x = normal_floats(100000, 2);
  std::vector<float> out(x.size());
  struct Case {
    float value;
    SparseLayout layout;
  };
  for (const Case& c : {Case{3.0f, SparseLayout::kIndices}, Case{1.5f, SparseLayout::kBitmap},
                        Case{0.001f, SparseLayout::kDense}}) {
    auto codec = codec_from("threshold:value=" + std::to_string(c.value));
    const auto payload = encode_ok(*codec, view_of(x));
    SparsePayloadInfo info;
    ASSERT_TRUE(decode_sparse_payload(CodecId::kThreshold, 0, payload.data(), payload.size(),
                                      view_of(out), SparseDecode::kOverwrite, &info)
                    .is_ok());
    EXPECT_EQ(info.layout, c.layout) << c.value;
    EXPECT_EQ(payload.size(), sparse_payload_bound(static_cast<int64_t>(x.size()), info.k));
  }
}

TEST(Threshold, DecodeAddAndEdgeCounts) {
  std::vector<float> x = {0.0f, -2.0f, 0.5f, 3.0f};
  auto codec = codec_from("threshold:value=1");
  const auto payload = encode_ok(*codec, view_of(x));
  std::vector<float> acc = {1.0f, 1.0f, 1.0f, 1.0f};
  ASSERT_TRUE(codec->decode_add(payload.data(), payload.size(), view_of(acc)).is_ok());
  EXPECT_EQ(acc, (std::vector<float>{1.0f, -1.0f, 1.0f, 4.0f}));
  std::vector<float> empty;
  EXPECT_TRUE(decode_ok(*codec, encode_ok(*codec, view_of(empty)), 0).empty());
  std::vector<float> zeros(1000, 0.0f);
  EXPECT_EQ(decode_ok(*codec, encode_ok(*codec, view_of(zeros)), 1000), zeros);
}

TEST(Threshold, NonFiniteIsRefusedInEveryLayout) {
  for (float value : {100.0f, 1.5f, 0.0f}) {
    std::vector<float> x = normal_floats(10000, 3);
    x[4321] = std::numeric_limits<float>::quiet_NaN();
    x[5000] = std::numeric_limits<float>::infinity();
    auto codec = codec_from("threshold:value=" + std::to_string(value));
    std::vector<uint8_t> out(codec->max_payload_bytes(view_of(x)));
    size_t written = 0;
    const Status st = codec->encode(view_of(x), EncodeContext(), out.data(), out.size(), &written);
    EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(st.message().find("4321"), std::string::npos) << st.message();
  }
}

TEST(Threshold, SpecIsCanonicalAndChecked) {
  EXPECT_EQ(codec_from("threshold")->spec(), "threshold:value=0.01");
  EXPECT_EQ(codec_from("threshold:value=0.25")->spec(), "threshold:value=0.25");
  std::unique_ptr<Codec> codec;
  EXPECT_EQ(make_codec("threshold:value=-1", &codec).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(make_codec("threshold:value=nan", &codec).code(), TIDEGATE_ERR_CONFIG);
}

}  // namespace
}  // namespace tidegate
