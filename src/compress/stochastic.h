// Counter-based randomness for stochastic rounding (DESIGN.md "Identical results": randomness
// comes only from EncodeContext::seed). Element i of a tensor gets the 32-bit value
//
//   r(seed, i) = mix32(uint32(i) ^ stream_key(seed, i >> 32))
//
// so the value depends on nothing but (seed, i): not on threads, chunking, vector width or
// device. A CUDA kernel computing the same formula produces the same payload bytes. mix32 is a
// bijective 32-bit integer hash (xor-shift / multiply rounds with constants chosen for low bias);
// it costs a handful of vector integer instructions per element, which is what lets stochastic
// quantisers run at memory speed.
#pragma once

#include <cstdint>

namespace tidegate {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The key of the 2^32-element segment `segment` of a tensor, for one seed.
inline uint32_t stream_key(uint64_t seed, uint64_t segment) {
  return static_cast<uint32_t>(splitmix64(seed ^ splitmix64(segment)) >> 32);
}

inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Uniform in [0, 1) with 24 random bits: exactly representable, so `u < frac` is a Bernoulli
// draw with probability frac rounded up to a multiple of 2^-24.
inline float uniform01(uint32_t r) { return static_cast<float>(r >> 8) * 0x1p-24f; }

// Length of the run of elements starting at tensor index `first` that a kernel may process with
// one 32-bit counter: at most `cap` and `remaining`, never crossing a multiple of 2^32.
inline int64_t counter_run_length(uint64_t first, int64_t remaining, int64_t cap) {
  const uint64_t to_boundary = (uint64_t{1} << 32) - (first & 0xffffffffull);
  int64_t run = remaining < cap ? remaining : cap;
  if (to_boundary < static_cast<uint64_t>(run)) run = static_cast<int64_t>(to_boundary);
  return run;
}

// Calls f(offset, n, lo_counter, key) for consecutive pieces of elements [first, first + n) of a
// tensor that never cross a 2^32 boundary, so a kernel can use lo_counter + j as a 32-bit
// counter inside one piece without wrapping.
template <typename F>
inline void for_each_counter_segment(uint64_t seed, uint64_t first, int64_t n, F&& f) {
  int64_t done = 0;
  while (done < n) {
    const uint64_t index = first + static_cast<uint64_t>(done);
    const uint64_t to_boundary = (uint64_t{1} << 32) - (index & 0xffffffffull);
    const int64_t piece = static_cast<int64_t>(to_boundary < static_cast<uint64_t>(n - done)
                                                   ? to_boundary
                                                   : static_cast<uint64_t>(n - done));
    f(done, piece, static_cast<uint32_t>(index), stream_key(seed, index >> 32));
    done += piece;
  }
}

}  // namespace tidegate
