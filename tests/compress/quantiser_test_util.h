// Helpers for the quantiser tests: codec construction, tensor views, deterministic test data,
// and the scalar building blocks of the reference implementations (written here from the
// payload definitions in the codec headers, independently of the library's kernels).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace tidegate::qtest {

inline std::unique_ptr<Codec> make(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  const Status st = make_codec(spec, &codec);
  EXPECT_TRUE(st.is_ok()) << spec << ": " << st.to_string();
  return codec;
}

template <typename T>
TensorView view_of(std::vector<T>& v, tidegate_dtype_t dtype) {
  TensorView t;
  t.data = v.data();
  t.count = static_cast<int64_t>(v.size());
  t.dtype = dtype;
  return t;
}
inline TensorView view_of(std::vector<float>& v) { return view_of(v, TIDEGATE_FLOAT32); }

// Encodes into a buffer of exactly max_payload_bytes; fails the test on error.
inline std::vector<uint8_t> encode(const Codec& codec, const TensorView& input, uint64_t seed = 0,
                                   int threads = 1) {
  std::vector<uint8_t> out(codec.max_payload_bytes(input));
  size_t written = 0;
  EncodeContext context;
  context.seed = seed;
  context.threads = threads;
  const Status st = codec.encode(input, context, out.data(), out.size(), &written);
  EXPECT_TRUE(st.is_ok()) << codec.spec() << ": " << st.to_string();
  EXPECT_LE(written, out.size());
  out.resize(written);
  return out;
}

inline std::vector<float> decode(const Codec& codec, const std::vector<uint8_t>& payload,
                                 int64_t count) {
  std::vector<float> out(static_cast<size_t>(count), -7.0f);
  const Status st = codec.decode(payload.data(), payload.size(), view_of(out));
  EXPECT_TRUE(st.is_ok()) << codec.spec() << ": " << st.to_string();
  return out;
}

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Gradient-like values: roughly normal with the given scale, some exact zeros and negatives.
inline std::vector<float> gradient(int64_t n, uint64_t salt = 1, float scale = 1e-2f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix(static_cast<uint64_t>(i) * 0x632be59bd9b4e019ull + salt);
    const float sum = static_cast<float>(r & 0xffff) + static_cast<float>((r >> 16) & 0xffff) +
                      static_cast<float>((r >> 32) & 0xffff) + static_cast<float>(r >> 48);
    v[static_cast<size_t>(i)] = (r % 53 == 0) ? 0.0f : (sum / 65536.0f - 2.0f) * scale;
  }
  return v;
}

// --- reference building blocks (from the documented definitions) ---

inline uint32_t ref_mix32(uint32_t x) {  // stochastic.h
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
inline uint32_t ref_stream_key(uint64_t seed, uint64_t segment) {
  return static_cast<uint32_t>(splitmix(seed ^ splitmix(segment)) >> 32);
}
// u for tensor element i under seed.
inline float ref_uniform(uint64_t seed, uint64_t i) {
  const uint32_t r = ref_mix32(static_cast<uint32_t>(i) ^ ref_stream_key(seed, i >> 32));
  return static_cast<float>(r >> 8) * 0x1p-24f;
}

// Lane-order double sums (lane_reduce.h): element i into lane i % 16, lanes added in order.
template <typename F>
double ref_lane_sum(const float* x, int64_t n, F term) {
  double lanes[16] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % 16] += term(static_cast<double>(x[i]));
  double sum = 0;
  for (double l : lanes) sum += l;
  return sum;
}

// LSB-first bit writer for reference payloads.
struct RefBits {
  std::vector<uint8_t> bytes;
  uint64_t bit = 0;
  void put(uint64_t value, unsigned width) {
    for (unsigned b = 0; b < width; ++b, ++bit) {
      if (bit % 8 == 0) bytes.push_back(0);
      if ((value >> b) & 1) bytes.back() |= static_cast<uint8_t>(1u << (bit % 8));
    }
  }
};

// Appends bytes (resize + memcpy: GCC 12 warns falsely about vector::insert here).
inline void append(std::vector<uint8_t>& out, const void* data, size_t n) {
  out.resize(out.size() + n);
  if (n > 0) std::memcpy(out.data() + out.size() - n, data, n);
}

inline void put_f32(std::vector<uint8_t>& out, float v) {
  out.resize(out.size() + 4);
  std::memcpy(out.data() + out.size() - 4, &v, 4);
}

// The 16-byte payload header (payload.h) followed by nothing.
inline std::vector<uint8_t> ref_header(CodecId codec, tidegate_dtype_t dtype, int64_t count) {
  std::vector<uint8_t> h(16, 0);
  h[0] = 0x54;
  h[1] = 0x43;
  h[2] = 1;
  h[3] = static_cast<uint8_t>(codec);
  h[4] = static_cast<uint8_t>(dtype);
  std::memcpy(h.data() + 8, &count, 8);
  return h;
}

inline bool is_error(const Status& st, tidegate_status_t code) {
  return !st.is_ok() && st.code() == code;
}

}  // namespace tidegate::qtest
