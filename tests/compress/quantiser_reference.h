// Reference encoders for the quantisers, written from the payload definitions in the codec
// sources (qsgd.cc, maxmin.cc, terngrad.cc, onebit.cc, signsgd.cc, efsign.cc, sign_magnitude.h)
// one element at a time. The tests require the library's payloads to equal these byte for byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "quantiser_test_util.h"

namespace tidegate::qtest {

struct BucketParams {
  CodecId codec;
  unsigned bits;
  int64_t bucket;
  unsigned scales;
  uint8_t variant;
};

inline std::vector<uint8_t> ref_bucket_header(const BucketParams& p, int64_t n) {
  std::vector<uint8_t> out = ref_header(p.codec, TIDEGATE_FLOAT32, n);
  out.push_back(static_cast<uint8_t>(p.bits));
  out.push_back(p.variant);
  out.push_back(static_cast<uint8_t>(p.scales));
  out.push_back(0);
  const uint32_t bucket = static_cast<uint32_t>(p.bucket);
  for (int s = 0; s < 32; s += 8) out.push_back(static_cast<uint8_t>(bucket >> s));
  return out;
}

// Builds a bucketed payload: scales_of(bucket start, length) -> scales; code_of(i, scales) -> code.
template <typename Scales, typename Code>
std::vector<uint8_t> ref_bucketed(const BucketParams& p, const std::vector<float>& x,
                                  Scales scales_of, Code code_of) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out = ref_bucket_header(p, n);
  std::vector<std::vector<float>> all;
  for (int64_t first = 0; first < n; first += p.bucket) {
    all.push_back(scales_of(x.data() + first, std::min(p.bucket, n - first)));
    for (float s : all.back()) put_f32(out, s);
  }
  RefBits bits;
  for (int64_t i = 0; i < n; ++i)
    bits.put(code_of(i, all[static_cast<size_t>(i / p.bucket)]), p.bits);
  append(out, bits.bytes.data(), bits.bytes.size());
  return out;
}

// sign_magnitude.h for one element.
inline uint32_t ref_sign_magnitude(float x, float norm, int levels, unsigned bits, uint64_t seed,
                                   int64_t i) {
  if (norm == 0) return 0;
  const float top = static_cast<float>(levels);
  const float ratio = top / norm;
  const float t = std::isfinite(ratio) ? std::fabs(x) * ratio : std::fabs(x) / norm * top;
  const float s = std::min(t + ref_uniform(seed, static_cast<uint64_t>(i)), top);
  return static_cast<uint32_t>(static_cast<int32_t>(s)) | (x < 0 ? 1u << (bits - 1) : 0u);
}

inline std::vector<uint8_t> ref_qsgd(const std::vector<float>& x, unsigned bits, int64_t bucket,
                                     uint64_t seed) {
  const int levels = (1 << (bits - 1)) - 1;
  return ref_bucketed(
      {CodecId::kQsgd, bits, bucket, 1, 0}, x,
      [](const float* b, int64_t m) {
        return std::vector<float>{
            static_cast<float>(std::sqrt(ref_lane_sum(b, m, [](double v) { return v * v; })))};
      },
      [&](int64_t i, const std::vector<float>& s) {
        return ref_sign_magnitude(x[static_cast<size_t>(i)], s[0], levels, bits, seed, i);
      });
}

inline std::vector<uint8_t> ref_terngrad(const std::vector<float>& x, int64_t bucket,
                                         uint64_t seed) {
  return ref_bucketed(
      {CodecId::kTernGrad, 2, bucket, 1, 0}, x,
      [](const float* b, int64_t m) {
        float mx = 0;
        for (int64_t i = 0; i < m; ++i) mx = std::max(mx, std::fabs(b[i]));
        return std::vector<float>{mx};
      },
      [&](int64_t i, const std::vector<float>& s) {
        return ref_sign_magnitude(x[static_cast<size_t>(i)], s[0], 1, 2, seed, i);
      });
}

inline std::vector<uint8_t> ref_maxmin(const std::vector<float>& x, unsigned bits, int64_t bucket,
                                       bool stochastic, uint64_t seed) {
  const float top = static_cast<float>((1 << bits) - 1);
  return ref_bucketed(
      {CodecId::kMaxMin, bits, bucket, 2, static_cast<uint8_t>(stochastic ? 1 : 0)}, x,
      [](const float* b, int64_t m) {
        float lo = b[0], hi = b[0];
        for (int64_t i = 0; i < m; ++i) lo = std::min(lo, b[i]), hi = std::max(hi, b[i]);
        return std::vector<float>{lo + 0.0f, hi + 0.0f};
      },
      [&](int64_t i, const std::vector<float>& s) -> uint32_t {
        const float lo = s[0], range = s[1] - s[0];
        if (range == 0) return 0;
        const float inverse = top / range;
        const float v = x[static_cast<size_t>(i)];
        const float t = std::isfinite(inverse) ? (v - lo) * inverse : (v - lo) / range * top;
        const float u = stochastic ? ref_uniform(seed, static_cast<uint64_t>(i)) : 0.5f;
        return static_cast<uint32_t>(static_cast<int32_t>(std::min(t + u, top)));
      });
}

inline std::vector<uint8_t> ref_onebit(const std::vector<float>& x, int64_t bucket) {
  return ref_bucketed(
      {CodecId::kOneBit, 1, bucket, 2, 0}, x,
      [](const float* b, int64_t m) {
        int64_t negatives = 0;
        for (int64_t i = 0; i < m; ++i) negatives += b[i] < 0;
        const double pos = ref_lane_sum(b, m, [](double v) { return v < 0 ? 0.0 : v; });
        const double neg = ref_lane_sum(b, m, [](double v) { return v < 0 ? v : 0.0; });
        return std::vector<float>{
            negatives < m ? static_cast<float>(pos / static_cast<double>(m - negatives)) : 0.0f,
            negatives > 0 ? static_cast<float>(neg / static_cast<double>(negatives)) : 0.0f};
      },
      [&](int64_t i, const std::vector<float>&) -> uint32_t {
        return x[static_cast<size_t>(i)] < 0;
      });
}

inline std::vector<uint8_t> ref_signsgd(const std::vector<float>& x) {
  std::vector<uint8_t> out =
      ref_header(CodecId::kSignSgd, TIDEGATE_FLOAT32, static_cast<int64_t>(x.size()));
  const uint8_t params[8] = {1, 0, 0, 0, 1, 0, 0, 0};
  append(out, params, 8);
  RefBits bits;
  for (float v : x) bits.put(v < 0, 1);
  append(out, bits.bytes.data(), bits.bytes.size());
  return out;
}

inline std::vector<uint8_t> ref_efsign(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  double total = 0;
  for (int64_t first = 0; first < n; first += 4096) {
    total += ref_lane_sum(x.data() + first, std::min<int64_t>(4096, n - first),
                          [](double v) { return std::fabs(v); });
  }
  std::vector<uint8_t> out = ref_header(CodecId::kEfSign, TIDEGATE_FLOAT32, n);
  put_f32(out, n > 0 ? static_cast<float>(total / static_cast<double>(n)) : 0.0f);
  out.resize(out.size() + 4, 0);
  RefBits bits;
  for (float v : x) bits.put(v < 0, 1);
  append(out, bits.bytes.data(), bits.bytes.size());
  return out;
}

}  // namespace tidegate::qtest
