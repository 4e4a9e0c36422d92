// Vectorised passes over float32 tensors by magnitude, shared by top-k, threshold and PowerSGD.
//
// Magnitudes are compared as integers: for a float x, magnitude_bits(x) = bits(x) & 0x7fffffff,
// and for non-negative IEEE floats the order of these integers is the order of the values. So
// a threshold compare is one integer compare per element (no float unit, no -ffast-math), -0.0
// and +0.0 are the same magnitude, denormals order correctly, and every NaN or infinity has a
// magnitude >= kNonFiniteMagnitude, above every finite value. The kernels use GCC/Clang vector
// extensions, which lower to SSE2 on baseline x86-64 and to NEON on aarch64 without any #ifdef;
// the work is memory-bound, so wider vectors would not pay.
//
// The non-finite policy itself (codec.h) is the framework's: first_nonfinite() and
// nonfinite_input() in float_io.h.
#pragma once

#include <cstdint>
#include <cstring>

namespace tidegate {

inline constexpr uint32_t kNonFiniteMagnitude = 0x7f800000u;  // bits of +Inf

inline uint32_t magnitude_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u & 0x7fffffffu;
}

// The magnitude bits of a finite threshold value >= 0 (so that |x| >= value <=> bits >= result).
inline uint32_t threshold_bits(float value) { return magnitude_bits(value); }

// Elements per block in the scans below: one block is four 128-bit vectors.
inline constexpr int64_t kScanBlock = 16;

// Bit j (of 16) set when x[j] has magnitude_bits >= threshold (threshold <= 0x7fffffff), for
// j in [0, kScanBlock). A scan tests a whole block with it and, for the few blocks that hold a
// hit, visits only the set bits.
inline uint32_t block_magnitude_mask(const float* x, uint32_t threshold) {
  typedef int32_t i32x4 __attribute__((vector_size(16)));
  const i32x4 mask = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
  const int32_t below = static_cast<int32_t>(threshold) - 1;  // signed compares are native
  const i32x4 limit = {below, below, below, below};
  i32x4 bits = {0, 0, 0, 0};
  for (int j = 0; j < kScanBlock; j += 4) {
    i32x4 v;
    std::memcpy(&v, x + j, sizeof v);
    const i32x4 lane_bits = {1 << j, 2 << j, 4 << j, 8 << j};
    bits |= ((v & mask) > limit) & lane_bits;
  }
  return static_cast<uint32_t>(bits[0] | bits[1] | bits[2] | bits[3]);
}

inline bool block_has_magnitude_at_least(const float* x, uint32_t threshold) {
  return block_magnitude_mask(x, threshold) != 0;
}

// Number of elements of x[0, n) with magnitude_bits >= threshold.
int64_t count_magnitude_at_least(const float* x, int64_t n, uint32_t threshold);

// True when the n little-endian float32 values at p (any alignment: an untrusted payload) are
// all finite. Decoders use it: encode() never sends a NaN or infinity (codec.h's policy), so
// one in a payload means the payload is malformed.
bool packed_floats_finite(const uint8_t* p, int64_t n);

}  // namespace tidegate
