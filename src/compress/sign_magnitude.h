// Stochastic sign-magnitude quantisation shared by qsgd (L = 2^(bits-1) - 1 levels, L2 norm)
// and terngrad (L = 1, max norm). For a bucket with scale `norm` > 0, element x (tensor index i)
// gets, in float32:
//   t     = |x| * (L / norm)            when L / norm is finite (the common case),
//           (|x| / norm) * L            otherwise (a subnormal norm);
//   level = trunc(min(t + u, L)),       u = uniform01(mix32(uint32(i) ^ key))   (stochastic.h)
//   code  = level | (x < 0) << (bits - 1)
// t <= L (|x| <= norm), so E[level] = t up to the rounding of t + u (at most 2^-16 of a level),
// and level * (norm / L) is an unbiased estimate of |x|. The decoder returns
// +-(level * (norm / L)). These formulas are the payload definition: a GPU kernel evaluating
// them in float32 with the same counter produces the same bytes.
#pragma once

#include <cmath>
#include <cstdint>

#include "compress/simd.h"
#include "compress/stochastic.h"
#include "compress/vec16.h"
#include "numeric/half.h"

namespace tidegate {

// Sixteen elements of the formula above (vec16.h explains the vector types).
template <bool kUseRatio>
struct SignMagnitudeGroup {
  float norm, ratio, top;
  int32_t sign_bit;
  uint32_t key;
  TG_INLINE void operator()(const float* x16, uint32_t counter, int32_t* codes16) const {
    using namespace vec16;
    f32 x, u;
    load(x16, x);
    const f32 magnitude = reinterpret_cast<f32>(reinterpret_cast<i32>(x) & 0x7fffffff);
    const f32 t = kUseRatio ? magnitude * ratio : magnitude / norm * top;
    uniform(counter, key, u);
    f32 s = t + u;
    s = s < top ? s : top;
    store(codes16, __builtin_convertvector(s, i32) | ((x < 0) & sign_bit));
  }
};

// Codes of x[0, m) (m <= kMaxGroupRun, a run that crosses no 2^32 boundary) for a bucket of
// scale norm > 0 with `levels` levels; counter is the low 32 bits of x[0]'s tensor index.
inline constexpr int64_t kMaxGroupRun = 1024;
TG_INLINE void sign_magnitude_codes(const float* TG_RESTRICT x, int64_t m, float norm, int levels,
                                    unsigned sign_shift, uint32_t counter, uint32_t key,
                                    uint8_t* TG_RESTRICT codes) {
  const float top = static_cast<float>(levels);
  const float ratio = top / norm;
  const int32_t sign_bit = 1 << sign_shift;
  int32_t wide[kMaxGroupRun];
  if (std::isfinite(ratio)) {
    vec16::for_each_group(x, m, counter, wide,
                          SignMagnitudeGroup<true>{norm, ratio, top, sign_bit, key});
  } else {
    vec16::for_each_group(x, m, counter, wide,
                          SignMagnitudeGroup<false>{norm, ratio, top, sign_bit, key});
  }
  vec16::narrow_codes(wide, m, codes);
}

TG_INLINE void sign_magnitude_values(const uint8_t* TG_RESTRICT codes, int64_t m, float unit,
                                     unsigned sign_shift, float* TG_RESTRICT out, bool add) {
  const uint32_t mask = (1u << sign_shift) - 1;
  if (add) {
    for (int64_t j = 0; j < m; ++j) {
      const float v = static_cast<float>(codes[j] & mask) * unit;
      out[j] += bits_float(float_bits(v) | (static_cast<uint32_t>(codes[j] >> sign_shift) << 31));
    }
  } else {
    for (int64_t j = 0; j < m; ++j) {
      const float v = static_cast<float>(codes[j] & mask) * unit;
      out[j] = bits_float(float_bits(v) | (static_cast<uint32_t>(codes[j] >> sign_shift) << 31));
    }
  }
}

}  // namespace tidegate
