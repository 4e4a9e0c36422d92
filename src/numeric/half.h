// IEEE binary16 (f16) and bfloat16 (bf16) conversions, written with bit operations (plus two
// exact or default-rounded float additions) rather than F16C or _Float16, so that every rank,
// whatever its CPU or compiler flags, turns the same float into the same bits (DESIGN.md
// "Identical results"). Reductions on 16-bit floats widen both operands to float, compute once
// in float and round back here to nearest-even: float's 24-bit significand is at least 2p+2
// bits for both formats, so that single rounding equals the correctly rounded 16-bit result
// for sum, product and quotient.
#pragma once

#include <cstdint>
#include <cstring>

namespace tidegate {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Exact: every f16 value (subnormals, infinities, NaN payloads) is representable in float.
// Every case is computed and then one is selected, so that loops over it vectorise.
inline float half_to_float(uint16_t h) {
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;  // exponent and mantissa
  const uint32_t exponent = shifted & 0x0f800000u;
  const uint32_t normal = shifted + 0x38000000u;   // rebias 15 -> 127
  const uint32_t special = shifted + 0x70000000u;  // inf/NaN: exponent 255
  // Subnormal: give it exponent 1 (+2^-14) and subtract 2^-14 again; exact in float.
  const uint32_t subnormal = float_bits(bits_float(normal + 0x00800000u) - 0x1p-14f);
  const uint32_t magnitude =
      exponent == 0x0f800000u ? special : (exponent == 0 ? subnormal : normal);
  return bits_float(magnitude | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

// Round to nearest, ties to even. NaN stays NaN (quieted, top payload bits kept); values that
// round beyond 65504 become infinity. Like half_to_float, select-based so that it vectorises.
inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  // Normal half: rebias 127 -> 15 and round the 13 dropped bits to nearest-even; a carry out
  // of the mantissa correctly bumps the exponent (up to infinity, 0x7c00).
  const uint32_t rebiased = magnitude - 0x38000000u;
  const uint32_t normal = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 aligns the value to float's ulp at 0.5, which is 2^-24, the f16
  // subnormal step, so the addition itself rounds to nearest-even (the default rounding mode,
  // which every float operation in tidegate assumes).
  const uint32_t subnormal = float_bits(bits_float(magnitude) + 0.5f) - 0x3f000000u;
  const uint32_t result = magnitude > 0x7f800000u    ? nan
                          : magnitude >= 0x47800000u ? 0x7c00u  // >= 65536 (or infinity)
                          : magnitude >= 0x38800000u ? normal
                                                     : subnormal;
  return static_cast<uint16_t>(sign | result);
}

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even; NaN stays NaN (quieted), overflow becomes infinity.
inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tidegate
