// The one-pass sum of sparse payloads (Codec::decode_sum of top-k and threshold): the bits of
// zeroing, decode_add of each payload in order and dividing (the base Codec's way), for every
// payload layout, overlapping entries, -0.0, subnormal results, sizes around the block size, no
// divisor, a divisor a power of two (multiplied by its reciprocal) and others;
// and a malformed payload named by its position, found before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "compress/sparse_payload.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

// A top-k payload of `count` elements keeping every `stride`-th element from `first` (values
// with mixed signs, -0.0 among them, distinct per payload).
std::vector<uint8_t> payload_of(int64_t count, int64_t first, int64_t stride, float scale) {
  std::vector<int64_t> indices;
  std::vector<float> values;
  for (int64_t i = first; i < count; i += stride) {
    indices.push_back(i);
    const int64_t j = static_cast<int64_t>(values.size());
    values.push_back(j % 5 == 0 ? -0.0f : scale * (static_cast<float>(j % 97) - 48.3f));
  }
  const int64_t k = static_cast<int64_t>(indices.size());
  std::vector<uint8_t> out(sparse_payload_bound(count, k));
  size_t written = 0;
  EXPECT_TRUE(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, count, indices.data(),
                                   values.data(), k, out.data(), out.size(), &written)
                  .is_ok());
  out.resize(written);
  return out;
}

std::unique_ptr<Codec> topk() {
  std::unique_ptr<Codec> codec;
  EXPECT_TRUE(make_codec("topk:ratio=0.01", &codec).is_ok());
  return codec;
}

TEST(SparseSum, BitsOfDecodingOneAfterAnother) {
  const auto codec = topk();
  for (int64_t count : {int64_t{1}, int64_t{8191}, int64_t{8192}, int64_t{20003}}) {
    // Strides give the three layouts: 1 dense, 5 bitmap, 997 packed indices; the payloads
    // overlap where their strides meet.
    std::vector<std::vector<uint8_t>> bytes = {
        payload_of(count, 0, 997, 1.5f), payload_of(count, 3 % count, 5, -0.25f),
        payload_of(count, 0, 1, 0.125f), payload_of(count, 0, 997, 3.0f),
        payload_of(count, 1 % count, 7, 1e-39f)};  // subnormal values
    std::vector<PayloadSpan> spans;
    for (const auto& b : bytes) spans.push_back({b.data(), b.size()});
    for (float divisor : {1.0f, 2.0f, 3.0f, 4.0f, 6.0f, 64.0f}) {
      std::vector<float> expected(count, 7.0f), got(count, 7.0f);
      size_t failed = 99;
      ASSERT_TRUE(
          codec->Codec::decode_sum(spans.data(), spans.size(), view_of(expected), divisor, &failed)
              .is_ok());
      ASSERT_TRUE(
          codec->decode_sum(spans.data(), spans.size(), view_of(got), divisor, &failed).is_ok());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), count * sizeof(float)), 0)
          << "count " << count << " divisor " << divisor;
      // Without the dense payload most elements are untouched: they must be +0.0.
      std::vector<PayloadSpan> sparse = {spans[0], spans[1], spans[3], spans[4]};
      ASSERT_TRUE(
          codec
              ->Codec::decode_sum(sparse.data(), sparse.size(), view_of(expected), divisor, &failed)
              .is_ok());
      ASSERT_TRUE(
          codec->decode_sum(sparse.data(), sparse.size(), view_of(got), divisor, &failed).is_ok());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), count * sizeof(float)), 0)
          << "sparse only, count " << count << " divisor " << divisor;
    }
  }
}

TEST(SparseSum, MalformedPayloadIsNamedAndNothingIsWritten) {
  const auto codec = topk();
  const int64_t count = 20003;
  std::vector<std::vector<uint8_t>> bytes = {payload_of(count, 0, 997, 1.0f),
                                             payload_of(count, 1, 997, 2.0f),
                                             payload_of(count, 2, 997, 3.0f)};
  bytes[2].pop_back();  // truncated
  std::vector<PayloadSpan> spans;
  for (const auto& b : bytes) spans.push_back({b.data(), b.size()});
  std::vector<float> out(count, 7.0f);
  size_t failed = 99;
  const Status st = codec->decode_sum(spans.data(), spans.size(), view_of(out), 1.0f, &failed);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_PROTOCOL) << st.to_string();
  EXPECT_EQ(failed, 2u);
  EXPECT_EQ(out, std::vector<float>(count, 7.0f));
}

}  // namespace
}  // namespace tidegate
