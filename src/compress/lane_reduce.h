// Reductions over a bucket with a fixed order of operations, so that every clone (and a GPU
// kernel that follows the same rule) gets the same bits:
//   element i is accumulated into lane i % 16, in index order;
//   the 16 lanes are then combined in lane order 0, 1, ..., 15.
// They are written with GCC/Clang vector types (two 8-float halves = lanes 0-7 and 8-15)
// because GCC does not reliably vectorise such lane arrays from scalar code; the compiler maps
// the fixed-width types onto AVX-512, AVX2 or SSE2 registers without changing any operation.
// All vector values stay inside these always-inline functions (no vector parameters or
// returns, so no ABI differences between clones). n is at most 2^24 (one bucket or block).
#pragma once

#include <cstdint>
#include <cstring>

#include "compress/simd.h"

namespace tidegate {

namespace lanes {
typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef double f64x8 __attribute__((vector_size(64)));
}  // namespace lanes

// Smallest and largest of x[0, n), n >= 1. Zeros are returned as +0 (adding +0 turns -0 into
// +0), so the result does not depend on which zero was seen first. Returns false when some
// element is NaN or infinite (the comparisons alone would skip a NaN).
TG_INLINE bool lane_min_max(const float* TG_RESTRICT x, int64_t n, float* lo, float* hi) {
  using namespace lanes;
  f32x8 mn[2], mx[2];
  i32x8 nan[2] = {i32x8{}, i32x8{}};
  mn[0] = mn[1] = mx[0] = mx[1] = f32x8{} + x[0];
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      f32x8 v;
      std::memcpy(&v, x + i + 8 * h, sizeof v);
      mn[h] = v < mn[h] ? v : mn[h];
      mx[h] = v > mx[h] ? v : mx[h];
      nan[h] |= v != v;
    }
  }
  bool any_nan = false;
  for (int64_t i = full; i < n; ++i) {
    const int h = static_cast<int>(i - full) / 8, j = static_cast<int>(i - full) % 8;
    mn[h][j] = x[i] < mn[h][j] ? x[i] : mn[h][j];
    mx[h][j] = x[i] > mx[h][j] ? x[i] : mx[h][j];
    any_nan |= x[i] != x[i];
  }
  float a = mn[0][0], b = mx[0][0];
  for (int lane = 0; lane < kLanes; ++lane) {
    a = mn[lane / 8][lane % 8] < a ? mn[lane / 8][lane % 8] : a;
    b = mx[lane / 8][lane % 8] > b ? mx[lane / 8][lane % 8] : b;
    any_nan |= nan[lane / 8][lane % 8] != 0;
  }
  *lo = a + 0.0f;
  *hi = b + 0.0f;
  return !any_nan && a - a == 0 && b - b == 0;  // x - x is 0 exactly when x is finite
}

// Largest |x| of x[0, n) (0 for n == 0), computed as an integer maximum of the bit patterns
// without sign (which orders non-negative floats like the floats themselves, and puts NaN above
// infinity): the result is NaN or infinite exactly when some element is.
TG_INLINE float lane_max_abs(const float* TG_RESTRICT x, int64_t n) {
  using namespace lanes;
  i32x8 mx[2] = {i32x8{}, i32x8{}};
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      i32x8 bits;
      std::memcpy(&bits, x + i + 8 * h, sizeof bits);
      bits &= 0x7fffffff;
      mx[h] = bits > mx[h] ? bits : mx[h];
    }
  }
  int32_t m = 0;
  for (int lane = 0; lane < kLanes; ++lane)
    m = mx[lane / 8][lane % 8] > m ? mx[lane / 8][lane % 8] : m;
  for (int64_t i = full; i < n; ++i) {  // a maximum is exact: the tail's lane does not matter
    int32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bits &= 0x7fffffff;
    m = bits > m ? bits : m;
  }
  float result;
  std::memcpy(&result, &m, sizeof result);
  return result;
}

// Sum of x[i]^2 in double (each square is exact in double; no overflow for any float input).
TG_INLINE double lane_sum_squares(const float* TG_RESTRICT x, int64_t n) {
  using namespace lanes;
  f64x8 acc[2] = {f64x8{}, f64x8{}};
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      f32x8 v;
      std::memcpy(&v, x + i + 8 * h, sizeof v);
      const f64x8 d = __builtin_convertvector(v, f64x8);
      acc[h] += d * d;
    }
  }
  for (int64_t i = full; i < n; ++i) {
    const double d = x[i];
    acc[(i - full) / 8][(i - full) % 8] += d * d;
  }
  double sum = 0;
  for (int lane = 0; lane < kLanes; ++lane) sum += acc[lane / 8][lane % 8];
  return sum;
}

// Sum of |x[i]| in double.
TG_INLINE double lane_sum_abs(const float* TG_RESTRICT x, int64_t n) {
  using namespace lanes;
  f64x8 acc[2] = {f64x8{}, f64x8{}};
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      i32x8 bits;
      std::memcpy(&bits, x + i + 8 * h, sizeof bits);
      acc[h] += __builtin_convertvector(reinterpret_cast<f32x8>(bits & 0x7fffffff), f64x8);
    }
  }
  for (int64_t i = full; i < n; ++i) acc[(i - full) / 8][(i - full) % 8] += x[i] < 0 ? -x[i] : x[i];
  double sum = 0;
  for (int lane = 0; lane < kLanes; ++lane) sum += acc[lane / 8][lane % 8];
  return sum;
}

// Sums of the non-negative and of the negative elements of x[0, n) in double, and how many
// are negative (x < 0; -0 counts as non-negative).
TG_INLINE void lane_sign_sums(const float* TG_RESTRICT x, int64_t n, double* positive,
                              double* negative, int64_t* negatives) {
  using namespace lanes;
  f64x8 pos[2] = {f64x8{}, f64x8{}}, neg[2] = {f64x8{}, f64x8{}};
  i32x8 count[2] = {i32x8{}, i32x8{}};  // -1 per negative element
  const int64_t full = n / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    for (int h = 0; h < 2; ++h) {
      f32x8 v;
      std::memcpy(&v, x + i + 8 * h, sizeof v);
      const i32x8 is_negative = v < 0;
      const f32x8 negative_part = reinterpret_cast<f32x8>(reinterpret_cast<i32x8>(v) & is_negative);
      pos[h] += __builtin_convertvector(v - negative_part, f64x8);  // exact: v or 0
      neg[h] += __builtin_convertvector(negative_part, f64x8);
      count[h] += is_negative;
    }
  }
  for (int64_t i = full; i < n; ++i) {
    const int h = static_cast<int>(i - full) / 8, j = static_cast<int>(i - full) % 8;
    const bool is_negative = x[i] < 0;
    pos[h][j] += is_negative ? 0.0 : x[i];
    neg[h][j] += is_negative ? x[i] : 0.0;
    count[h][j] -= is_negative ? 1 : 0;
  }
  double p = 0, q = 0;
  int64_t c = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    p += pos[lane / 8][lane % 8];
    q += neg[lane / 8][lane % 8];
    c -= count[lane / 8][lane % 8];
  }
  *positive = p;
  *negative = q;
  *negatives = c;
}

}  // namespace tidegate
