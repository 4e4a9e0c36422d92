// Sixteen-lane float32 <-> IEEE binary16 conversions for the codecs' hot loops. They evaluate
// exactly the integer formulas of collectives/half.h (round to nearest even, subnormals,
// overflow to infinity, NaN quieting), lane by lane, so every bit pattern converts identically;
// the tests compare them with half.h over every rounding case. They exist because GCC 12 turns
// the nested selects of the scalar versions into branches and leaves those loops scalar; they
// use 16 lanes because the AVX-512F clone then works in zmm registers (32 of them, mask
// compares) instead of VEX ymm code that runs out of registers. Vector values stay inside these
// always-inline functions (vec16.h explains why); tails shorter than 16 use half.h itself.
#pragma once

#include <cstdint>
#include <cstring>

#include "compress/simd.h"
#include "numeric/half.h"

namespace tidegate {
namespace half_vec {

inline constexpr int kWidth = 16;
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef float f32x16 __attribute__((vector_size(64)));

// half bits of 16 floats, widened to u32 (float_to_half). kKeepNan = false turns NaN into
// infinity instead of a quiet NaN: for encoders that refuse both, it saves a select.
template <bool kKeepNan>
TG_INLINE void to_half16(const float* in, uint32_t* out) {
  u32x16 x;
  std::memcpy(&x, in, sizeof x);
  const u32x16 magnitude = x & 0x7fffffffu;
  const u32x16 rebiased = magnitude - 0x38000000u;
  const u32x16 normal = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
  const u32x16 subnormal =
      reinterpret_cast<u32x16>(reinterpret_cast<f32x16>(magnitude) + 0.5f) - 0x3f000000u;
  u32x16 result = magnitude >= 0x38800000u ? normal : subnormal;
  result = magnitude >= 0x47800000u ? u32x16{} + 0x7c00u : result;
  if constexpr (kKeepNan)
    result = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : result;
  result |= (x >> 16) & 0x8000u;
  std::memcpy(out, &result, sizeof result);
}

// 16 floats from half bits given widened to u32 (half_to_float).
TG_INLINE void from_half16(const uint32_t* in, float* out) {
  u32x16 bits;
  std::memcpy(&bits, in, sizeof bits);
  const u32x16 shifted = (bits & 0x7fffu) << 13;
  const u32x16 exponent = shifted & 0x0f800000u;
  const u32x16 normal = shifted + 0x38000000u;
  const u32x16 special = shifted + 0x70000000u;
  const u32x16 subnormal =
      reinterpret_cast<u32x16>(reinterpret_cast<f32x16>(normal + 0x00800000u) - 0x1p-14f);
  u32x16 magnitude = exponent == 0 ? subnormal : normal;
  magnitude = exponent == 0x0f800000u ? special : magnitude;
  const u32x16 result = magnitude | ((bits & 0x8000u) << 16);
  std::memcpy(out, &result, sizeof result);
}

// Chunk bound of the helpers below (their staging arrays live on the stack).
inline constexpr int64_t kMaxChunk = 2048;

// out[i] = float_to_half(in[i]) for n <= kMaxChunk; returns false when some output is infinite
// or NaN. With kKeepNan = false a NaN input gives infinity (also reported as false).
template <bool kKeepNan>
TG_INLINE bool floats_to_halves(const float* TG_RESTRICT in, int64_t n, uint16_t* TG_RESTRICT out) {
  uint32_t wide[kMaxChunk];
  const int64_t whole = n / kWidth * kWidth;
  for (int64_t i = 0; i < whole; i += kWidth) to_half16<kKeepNan>(in + i, wide + i);
  for (int64_t i = whole; i < n; ++i) wide[i] = float_to_half(in[i]);
  uint32_t bad = 0;  // narrowing and the check: one loop the compiler vectorises
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint16_t>(wide[i]);
    bad |= (wide[i] & 0x7fffu) >= 0x7c00u;
  }
  return bad == 0;
}

// out[i] = half_to_float(in[i]) (or out[i] += it when add) for n <= kMaxChunk.
TG_INLINE void halves_to_floats(const uint16_t* TG_RESTRICT in, int64_t n, float* TG_RESTRICT out,
                                bool add) {
  uint32_t wide[kMaxChunk];
  float values[kMaxChunk];
  for (int64_t i = 0; i < n; ++i) wide[i] = in[i];
  const int64_t whole = n / kWidth * kWidth;
  float* target = add ? values : out;
  for (int64_t i = 0; i < whole; i += kWidth) from_half16(wide + i, target + i);
  for (int64_t i = whole; i < n; ++i) target[i] = half_to_float(in[i]);
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] += values[i];
  }
}

}  // namespace half_vec
}  // namespace tidegate
