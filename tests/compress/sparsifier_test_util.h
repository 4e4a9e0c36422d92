// Helpers shared by the sparsifier and PowerSGD tests: tensor views, encode/decode round trips
// through the Codec interface, and plain reference implementations to check the codecs against.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace tidegate::sparsifier_test {

inline TensorView view_of(std::vector<float>& v) {
  TensorView t;
  t.data = v.data();
  t.count = static_cast<int64_t>(v.size());
  t.dtype = TIDEGATE_FLOAT32;
  return t;
}

inline TensorView matrix_view(std::vector<float>& v, int64_t rows, int64_t cols) {
  TensorView t = view_of(v);
  t.rows = rows;
  t.cols = cols;
  return t;
}

inline std::unique_ptr<Codec> codec_from(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  const Status st = make_codec(spec, &codec);
  EXPECT_TRUE(st.is_ok()) << spec << ": " << st.to_string();
  return codec;
}

// Encodes into a buffer of exactly max_payload_bytes and returns the payload.
inline std::vector<uint8_t> encode_ok(const Codec& codec, const TensorView& input,
                                      uint64_t seed = 1) {
  std::vector<uint8_t> out(codec.max_payload_bytes(input));
  size_t written = 0;
  EncodeContext context;
  context.seed = seed;
  const Status st = codec.encode(input, context, out.data(), out.size(), &written);
  EXPECT_TRUE(st.is_ok()) << codec.spec() << ": " << st.to_string();
  EXPECT_LE(written, out.size());
  out.resize(written);
  return out;
}

inline std::vector<float> decode_ok(const Codec& codec, const std::vector<uint8_t>& payload,
                                    int64_t count, int64_t rows = 0, int64_t cols = 0) {
  std::vector<float> out(static_cast<size_t>(count), 12345.0f);  // decode must overwrite everything
  TensorView t = matrix_view(out, rows, cols);
  const Status st = codec.decode(payload.data(), payload.size(), t);
  EXPECT_TRUE(st.is_ok()) << codec.spec() << ": " << st.to_string();
  return out;
}

inline std::vector<float> normal_floats(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// All indices by (|x| descending, index ascending): the order top-k must follow.
inline std::vector<int64_t> magnitude_order(const std::vector<float>& x) {
  std::vector<int64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const float ma = std::fabs(x[a]), mb = std::fabs(x[b]);
    return ma != mb ? ma > mb : a < b;
  });
  return order;
}

// The first k of an order, in ascending index order.
inline std::vector<int64_t> top_of(const std::vector<int64_t>& order, int64_t k) {
  std::vector<int64_t> top(
      order.begin(), order.begin() + std::min<int64_t>(k, static_cast<int64_t>(order.size())));
  std::sort(top.begin(), top.end());
  return top;
}

// The top k by (|x| descending, index ascending), returned in ascending index order.
inline std::vector<int64_t> reference_top_k(const std::vector<float>& x, int64_t k) {
  return top_of(magnitude_order(x), k);
}

// Indices of the non-zero elements of a decoded tensor.
inline std::vector<int64_t> nonzero_indices(const std::vector<float>& y) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] != 0.0f) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

// Every proper prefix of a valid payload must be refused with PROTOCOL, leaving output as it was.
inline void expect_truncations_rejected(const Codec& codec, const std::vector<uint8_t>& payload,
                                        int64_t count, int64_t rows = 0, int64_t cols = 0) {
  std::vector<float> out(static_cast<size_t>(count), 7.0f);
  TensorView t = matrix_view(out, rows, cols);
  for (size_t len = 0; len < payload.size(); ++len) {
    std::vector<uint8_t> cut(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(len));
    const Status st = codec.decode_add(cut.data(), cut.size(), t);
    ASSERT_EQ(st.code(), TIDEGATE_ERR_PROTOCOL)
        << codec.spec() << " accepted a payload cut to " << len << " bytes";
  }
  for (float v : out) ASSERT_EQ(v, 7.0f) << "a rejected payload wrote into the output";
}

}  // namespace tidegate::sparsifier_test
