// Sixteen-lane vector helpers (GCC/Clang vector extensions) for the quantisers' inner
// loops. GCC's auto-vectoriser gives up on those loops whenever its if-conversion turns a
// select into a branch, which depends on constant propagation (it failed for terngrad's single
// level, and for maxmin when the level count became a constant), so these loops are written
// with explicit vector types instead: each lane evaluates exactly the scalar formula, in the
// same float32 operations, so results do not depend on the vector width or the clone. Sixteen
// lanes are one AVX-512 register, two AVX2 ones, four SSE2 ones: the compiler splits them.
//
// Rules that keep the clones ABI-safe (-Wpsabi): vector values never cross a function boundary
// by value; helpers take them by reference and are always inlined. Lanes are elements
// j .. j + 15; a partial last group runs the same code on a zero-padded copy.
#pragma once

#include <cstdint>
#include <cstring>

#include "compress/simd.h"
#include "compress/stochastic.h"

namespace tidegate {
namespace vec16 {

inline constexpr int kWidth = 16;
typedef float f32 __attribute__((vector_size(64)));
typedef int32_t i32 __attribute__((vector_size(64)));
typedef uint32_t u32 __attribute__((vector_size(64)));

TG_INLINE void load(const float* p, f32& v) { std::memcpy(&v, p, sizeof v); }
TG_INLINE void store(int32_t* p, const i32& v) { std::memcpy(p, &v, sizeof v); }

// uniform01(mix32((counter + lane) ^ key)) for the sixteen lanes (stochastic.h).
TG_INLINE void uniform(uint32_t counter, uint32_t key, f32& u) {
  const u32 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  u32 x = (counter + lane) ^ key;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  u = __builtin_convertvector(reinterpret_cast<i32>(x >> 8), f32) * 0x1p-24f;
}

// Runs body(x16, counter, codes16) over x[0, m) in groups of 16, writing int32 codes: whole
// groups in place, a partial last group through zero-padded copies. counter is the 32-bit RNG
// counter of x[0]. Body is a functor with a TG_INLINE operator() (a lambda's body could be
// compiled out of line, as baseline code).
template <typename Body>
TG_INLINE void for_each_group(const float* TG_RESTRICT x, int64_t m, uint32_t counter,
                              int32_t* TG_RESTRICT codes, const Body& body) {
  const int64_t whole = m / kWidth * kWidth;
  for (int64_t j = 0; j < whole; j += kWidth)
    body(x + j, counter + static_cast<uint32_t>(j), codes + j);
  if (whole < m) {
    float padded[kWidth] = {};
    int32_t out[kWidth];
    std::memcpy(padded, x + whole, static_cast<size_t>(m - whole) * sizeof(float));
    body(padded, counter + static_cast<uint32_t>(whole), out);
    std::memcpy(codes + whole, out, static_cast<size_t>(m - whole) * sizeof(int32_t));
  }
}

// codes[j] = (uint8_t)wide[j]: a loop GCC vectorises with pack instructions.
TG_INLINE void narrow_codes(const int32_t* TG_RESTRICT wide, int64_t m,
                            uint8_t* TG_RESTRICT codes) {
  for (int64_t j = 0; j < m; ++j) codes[j] = static_cast<uint8_t>(wide[j]);
}

}  // namespace vec16
}  // namespace tidegate
