// Counter-based random numbers for the sparsifiers and PowerSGD. DESIGN.md "Identical results"
// asks that randomness come only from a seed every rank derives identically, so the generator
// here is a pure function of (seed, counter): the value drawn for counter i does not depend on
// how many values were drawn before it, on threads, or on the platform. That lets a decoder
// regenerate random-k's indices from the seed alone, and lets PowerSGD redraw one column of Q
// without replaying a stream.
#pragma once

#include <cstdint>

namespace tidegate {

// 128-bit products for multiply-shift range reduction (GCC and Clang on 64-bit targets).
__extension__ typedef unsigned __int128 seeded_u128;

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijection on 64 bits whose outputs for
// consecutive inputs pass BigCrush. Two rounds decorrelate the seed from the counter.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t seeded_bits(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (counter * 0xd1b54a32d192ed03ull + 1));
}

// Uniform integer in [0, bound) for bound >= 1, by Lemire's multiply-shift. The bias is at most
// bound / 2^64, far below anything a gradient codec can observe, and there is no rejection loop,
// so the work per draw is fixed.
inline uint64_t seeded_below(uint64_t seed, uint64_t counter, uint64_t bound) {
  const seeded_u128 wide = static_cast<seeded_u128>(seeded_bits(seed, counter)) * bound;
  return static_cast<uint64_t>(wide >> 64);
}

// Uniform float in [-1, 1), exactly representable (24 random bits), identical on every platform.
inline float seeded_symmetric_float(uint64_t seed, uint64_t counter) {
  const int64_t r = static_cast<int64_t>(seeded_bits(seed, counter) >> 40);  // [0, 2^24)
  return static_cast<float>(r - (int64_t{1} << 23)) * (1.0f / static_cast<float>(1 << 23));
}

}  // namespace tidegate
