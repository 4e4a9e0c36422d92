#include "compress/magnitude_scan.h"

#include <algorithm>

namespace tidegate {

int64_t count_magnitude_at_least(const float* x, int64_t n, uint32_t threshold) {
  typedef int32_t i32x4 __attribute__((vector_size(16)));
  const i32x4 mask = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
  const int32_t below = static_cast<int32_t>(threshold) - 1;
  const i32x4 limit = {below, below, below, below};
  int64_t total = 0;
  int64_t i = 0;
  // Lane counters are int32: drain them every 2^20 elements, far below overflow.
  constexpr int64_t kChunk = int64_t{1} << 20;
  while (i + 4 <= n) {
    const int64_t end = i + std::min<int64_t>(kChunk, (n - i) & ~int64_t{3});
    i32x4 lanes = {0, 0, 0, 0};
    for (; i < end; i += 4) {
      i32x4 v;
      std::memcpy(&v, x + i, sizeof v);
      lanes -= ((v & mask) > limit);  // a true compare is -1
    }
    total += static_cast<int64_t>(lanes[0]) + lanes[1] + lanes[2] + lanes[3];
  }
  for (; i < n; ++i) total += magnitude_bits(x[i]) >= threshold ? 1 : 0;
  return total;
}

bool packed_floats_finite(const uint8_t* p, int64_t n) {
  uint32_t bad = 0;  // an OR over everything vectorises; there is no early exit to take
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + static_cast<size_t>(i) * sizeof bits, sizeof bits);
    bad |= (bits & 0x7f800000u) == 0x7f800000u ? 1u : 0u;
  }
  return bad == 0;
}

}  // namespace tidegate
