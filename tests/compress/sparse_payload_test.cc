// The shared sparse payload: index widths fitted to the tensor (including past 2^32 elements,
// checked by arithmetic rather than a 16 GiB tensor), layout choice, and malformed payloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "compress/payload.h"
#include "compress/sparse_entries.h"
#include "compress/sparse_payload.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

TEST(SparsePayload, IndexWidthFitsTheTensor) {
  EXPECT_EQ(sparse_index_bits(0), 1u);
  EXPECT_EQ(sparse_index_bits(1), 1u);
  EXPECT_EQ(sparse_index_bits(2), 1u);
  EXPECT_EQ(sparse_index_bits(3), 2u);
  EXPECT_EQ(sparse_index_bits(int64_t{1} << 20), 20u);
  EXPECT_EQ(sparse_index_bits((int64_t{1} << 20) + 1), 21u);
  EXPECT_EQ(sparse_index_bits(int64_t{1} << 26), 26u);
  EXPECT_EQ(sparse_index_bits(int64_t{1} << 31), 31u);
  EXPECT_EQ(sparse_index_bits((int64_t{1} << 31) + 1), 32u);
  EXPECT_EQ(sparse_index_bits(int64_t{1} << 32), 32u);
  EXPECT_EQ(sparse_index_bits((int64_t{1} << 32) + 1), 33u);  // the switch past 32-bit indices
  EXPECT_EQ(sparse_index_bits(kMaxSparseCount), 56u);
  // 5 Gi elements, 1% kept: 33-bit indices, no overflow in the size arithmetic.
  const int64_t n = int64_t{5} << 30, k = n / 100;
  EXPECT_EQ(sparse_body_bytes(n, k, SparseLayout::kIndices),
            (static_cast<size_t>(k) * 33 + 7) / 8 + k * 4);
  EXPECT_EQ(choose_sparse_layout(n, k), SparseLayout::kIndices);
  EXPECT_EQ(sparse_payload_bound(n, n), kSparsePrefixBytes + static_cast<size_t>(n) * 4);
}

TEST(SparsePayload, WideIndicesRoundTripThroughThePacking) {
  // Indices near 2^40 in a (virtual) tensor of 2^40 + 5 elements: the packed form reads back.
  // Decoding needs a real tensor, so this checks the writer and the bit reader directly.
  const int64_t count = (int64_t{1} << 40) + 5;
  const std::vector<int64_t> indices = {0, 1, (int64_t{1} << 33) + 3, (int64_t{1} << 40) + 4};
  const std::vector<float> values = {1, 2, 3, 4};
  std::vector<uint8_t> out(sparse_payload_bound(count, 4));
  size_t written = 0;
  ASSERT_TRUE(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, count, indices.data(),
                                   values.data(), 4, out.data(), out.size(), &written)
                  .is_ok());
  EXPECT_EQ(out[kSparsePrefixBytes - 1], 41);  // index_bits
  EXPECT_EQ(written, kSparsePrefixBytes + (4 * 41 + 7) / 8 + 16);
  uint64_t window = 0;
  unsigned have = 0;
  size_t byte = kSparsePrefixBytes;
  for (int64_t expect : indices) {
    while (have < 41) {
      window |= static_cast<uint64_t>(out[byte++]) << have;
      have += 8;
    }
    EXPECT_EQ(static_cast<int64_t>(window & ((uint64_t{1} << 41) - 1)), expect);
    window >>= 41;
    have -= 41;
  }
}

// A top-k payload of k entries spread evenly over count elements (its layout follows from k),
// values distinct and every third one -0.0 when signed_zeros.
std::vector<uint8_t> spread_payload(int64_t count, int64_t k, bool signed_zeros) {
  std::vector<int64_t> indices;
  std::vector<float> values;
  for (int64_t i = 0; i < k; ++i) {
    indices.push_back(i * count / k);
    values.push_back(signed_zeros && i % 3 == 0 ? -0.0f
                                                : 0.37f * static_cast<float>(i + 1) - 11.0f);
  }
  std::vector<uint8_t> payload(sparse_payload_bound(count, k));
  size_t written = 0;
  EXPECT_TRUE(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, count, indices.data(),
                                   values.data(), k, payload.data(), payload.size(), &written)
                  .is_ok());
  payload.resize(written);
  return payload;
}

// Subtracting a payload (error feedback's residual update) touches only its entries and gives
// the bits of a dense decode followed by an elementwise subtraction, in every layout: x - 0 is
// x, so -0.0, +0.0 and values the payload does not list are unchanged.
TEST(SparsePayload, SubtractIsTheDenseDecodeSubtractedBitForBit) {
  const int64_t count = 1000;
  std::vector<SparseLayout> layouts;
  for (int64_t k : {int64_t{3}, int64_t{200}, int64_t{1000}}) {  // indices, bitmap, dense
    const std::vector<uint8_t> payload = spread_payload(count, k, /*signed_zeros=*/true);
    const size_t written = payload.size();
    std::vector<float> residual(count);
    for (int64_t i = 0; i < count; ++i) {
      residual[i] = i % 7 == 0 ? -0.0f : (i % 11 == 0 ? 0.0f : 0.013f * static_cast<float>(i) - 5);
    }
    std::vector<float> decoded(count), expected(count), got = residual;
    SparsePayloadInfo info;
    ASSERT_TRUE(decode_sparse_payload(CodecId::kTopK, 0, payload.data(), written, view_of(decoded),
                                      SparseDecode::kOverwrite, &info)
                    .is_ok());
    for (int64_t i = 0; i < count; ++i) expected[i] = residual[i] - decoded[i];
    ASSERT_TRUE(decode_sparse_payload(CodecId::kTopK, 0, payload.data(), written, view_of(got),
                                      SparseDecode::kSubtract)
                    .is_ok());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), count * sizeof(float)), 0)
        << "k " << k << " layout " << static_cast<int>(info.layout);
    layouts.push_back(info.layout);
  }
  EXPECT_EQ(layouts, (std::vector<SparseLayout>{SparseLayout::kIndices, SparseLayout::kBitmap,
                                                SparseLayout::kDense}));
}

// The cursor visits every layout's entries in index order, a range at a time, wherever the
// ranges end (mid-byte of a bitmap included), and the visits rebuild the dense decode exactly.
TEST(SparsePayload, TheEntryCursorVisitsEveryLayoutInRangesAsTheDenseDecodeHasThem) {
  const int64_t count = 1003;
  std::vector<SparseLayout> layouts;
  for (int64_t k : {int64_t{3}, int64_t{200}, int64_t{1003}}) {  // indices, bitmap, dense
    const std::vector<uint8_t> payload = spread_payload(count, k, /*signed_zeros=*/false);
    const size_t written = payload.size();
    std::vector<float> decoded(count);
    ASSERT_TRUE(decode_sparse_payload(CodecId::kTopK, 0, payload.data(), written, view_of(decoded),
                                      SparseDecode::kOverwrite)
                    .is_ok());
    ParsedSparsePayload parsed;
    ASSERT_TRUE(
        parse_sparse_payload(CodecId::kTopK, 0, payload.data(), written, count, &parsed).is_ok());
    layouts.push_back(parsed.layout);
    for (int64_t step : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{333}, count}) {
      SparseEntryCursor cursor(parsed);
      std::vector<float> rebuilt(count, 0.0f);
      int64_t last = -1;
      for (int64_t end = step; end < count + step; end += step) {
        cursor.visit_below(std::min(end, count), [&](int64_t i, float v) {
          ASSERT_GT(i, last);
          ASSERT_LT(i, std::min(end, count));
          last = i;
          rebuilt[i] = v;
        });
      }
      EXPECT_EQ(std::memcmp(rebuilt.data(), decoded.data(), count * sizeof(float)), 0)
          << "k " << k << ", ranges of " << step;
    }
  }
  EXPECT_EQ(layouts, (std::vector<SparseLayout>{SparseLayout::kIndices, SparseLayout::kBitmap,
                                                SparseLayout::kDense}));
}

TEST(SparsePayload, SubtractNeedsAFloat32Output) {
  const std::vector<int64_t> indices = {1};
  const std::vector<float> values = {2};
  std::vector<uint8_t> payload(sparse_payload_bound(4, 1));
  size_t written = 0;
  ASSERT_TRUE(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, 4, indices.data(),
                                   values.data(), 1, payload.data(), payload.size(), &written)
                  .is_ok());
  std::vector<uint16_t> half(4, 0);
  TensorView out;
  out.data = half.data();
  out.count = 4;
  out.dtype = TIDEGATE_FLOAT16;
  const Status st = decode_sparse_payload(CodecId::kTopK, 0, payload.data(), written, out,
                                          SparseDecode::kSubtract);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << st.to_string();
  EXPECT_NE(st.message().find("float32"), std::string::npos) << st.message();
  EXPECT_EQ(half, std::vector<uint16_t>(4, 0));
}

TEST(SparsePayload, EncoderBugsAreInternalErrors) {
  std::vector<uint8_t> out(1024);
  size_t written = 0;
  const std::vector<float> values = {1, 2};
  const std::vector<int64_t> unsorted = {5, 3}, outside = {1, 10};
  EXPECT_EQ(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, 10, unsorted.data(),
                                 values.data(), 2, out.data(), out.size(), &written)
                .code(),
            TIDEGATE_ERR_INTERNAL);
  EXPECT_EQ(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, 10, outside.data(),
                                 values.data(), 2, out.data(), out.size(), &written)
                .code(),
            TIDEGATE_ERR_INTERNAL);
  EXPECT_EQ(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, 0, 10, unsorted.data(),
                                 values.data(), 2, out.data(), 10, &written)
                .code(),
            TIDEGATE_ERR_INTERNAL);
}

// Payloads of each layout, for the malformation tests.
std::vector<std::vector<uint8_t>> sample_payloads(std::vector<float>& x) {
  std::vector<std::vector<uint8_t>> payloads;
  for (const char* spec : {"topk:k=20", "threshold:value=1", "threshold:value=0", "topk:k=0"}) {
    payloads.push_back(encode_ok(*codec_from(spec), view_of(x)));
  }
  return payloads;
}

TEST(SparsePayload, TruncationAtEveryLengthIsRejected) {
  std::vector<float> x = normal_floats(300, 1);
  auto topk = codec_from("topk:k=20");
  auto threshold = codec_from("threshold:value=1");
  const auto payloads = sample_payloads(x);
  expect_truncations_rejected(*topk, payloads[0], 300);
  expect_truncations_rejected(*threshold, payloads[1], 300);
  expect_truncations_rejected(*threshold, payloads[2], 300);
  expect_truncations_rejected(*topk, payloads[3], 300);
}

TEST(SparsePayload, CorruptFieldsAreRejectedWithoutWriting) {
  std::vector<float> x = normal_floats(300, 2);
  auto codec = codec_from("topk:k=20");
  const auto good = encode_ok(*codec, view_of(x));
  std::vector<float> out(300, 7.0f);
  auto rejects = [&](std::vector<uint8_t> bad, const char* what) {
    EXPECT_EQ(codec->decode_add(bad.data(), bad.size(), view_of(out)).code(), TIDEGATE_ERR_PROTOCOL)
        << what;
  };
  auto bad = good;
  const int64_t huge = std::numeric_limits<int64_t>::max();
  std::memcpy(bad.data() + 16, &huge, 8);
  rejects(bad, "k huge");
  int64_t minus = -1;
  bad = good;
  std::memcpy(bad.data() + 16, &minus, 8);
  rejects(bad, "k negative");
  bad = good;
  bad[24] = 32;
  rejects(bad, "index width");
  bad = good;
  bad[5] = 3;
  rejects(bad, "layout 3");
  bad = good;
  bad[5] = 0x40;
  rejects(bad, "unknown flag");
  bad = good;
  bad[4] = 9;
  rejects(bad, "dtype");
  bad = good;
  bad.push_back(0);
  rejects(bad, "trailing byte");
  // Indices: 9 bits each at 300 elements. All ones = 511 > 299 (out of range).
  bad = good;
  bad[kSparsePrefixBytes] = 0xff;
  bad[kSparsePrefixBytes + 1] = 0xff;
  rejects(bad, "index out of range");
  // Zeroing the index field makes every index 0: not ascending.
  bad = good;
  std::fill(bad.begin() + kSparsePrefixBytes, bad.begin() + kSparsePrefixBytes + (20 * 9 + 7) / 8,
            0);
  rejects(bad, "repeated index");
  bad = good;
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(bad.data() + bad.size() - 4, &inf, 4);
  rejects(bad, "infinite value");
  for (float v : out) ASSERT_EQ(v, 7.0f);
  // Every single-byte corruption either decodes (to something) or is refused, never crashes.
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      bad = good;
      bad[i] ^= flip;
      std::vector<float> scratch(300);
      const Status st = codec->decode(bad.data(), bad.size(), view_of(scratch));
      EXPECT_TRUE(st.is_ok() || st.code() == TIDEGATE_ERR_PROTOCOL) << st.to_string();
    }
  }
}

TEST(SparsePayload, BitmapWithStrayBitsIsRejected) {
  std::vector<float> x = normal_floats(301, 3);  // 301 = 37 bytes + 5 bits
  auto codec = codec_from("threshold:value=1");
  auto payload = encode_ok(*codec, view_of(x));
  std::vector<float> out(301);
  SparsePayloadInfo info;
  ASSERT_TRUE(decode_sparse_payload(CodecId::kThreshold, 0, payload.data(), payload.size(),
                                    view_of(out), SparseDecode::kOverwrite, &info)
                  .is_ok());
  ASSERT_EQ(info.layout, SparseLayout::kBitmap);
  auto bad = payload;
  bad[kSparsePrefixBytes + 37] |= 0x80;  // a bit past element 300
  EXPECT_EQ(codec->decode(bad.data(), bad.size(), view_of(out)).code(), TIDEGATE_ERR_PROTOCOL);
  bad = payload;
  bad[kSparsePrefixBytes] ^= 0x01;  // one more or one fewer element than k
  EXPECT_EQ(codec->decode(bad.data(), bad.size(), view_of(out)).code(), TIDEGATE_ERR_PROTOCOL);
}

TEST(SparsePayload, WrongCountOrCodecIsRejected) {
  std::vector<float> x = normal_floats(300, 4);
  const auto payload = encode_ok(*codec_from("topk:k=20"), view_of(x));
  std::vector<float> other(299);
  EXPECT_EQ(codec_from("topk:k=20")->decode(payload.data(), payload.size(), view_of(other)).code(),
            TIDEGATE_ERR_PROTOCOL);
  std::vector<float> same(300);
  EXPECT_EQ(codec_from("threshold")->decode(payload.data(), payload.size(), view_of(same)).code(),
            TIDEGATE_ERR_PROTOCOL);
}

}  // namespace
}  // namespace tidegate
