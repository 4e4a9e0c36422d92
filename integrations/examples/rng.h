// The examples' random numbers: splitmix64, chosen over <random> because its distributions differ
// between standard libraries, and every rank must draw the same split, shuffles and initial
// weights, even ranks built with another compiler.
#ifndef TIDEGATE_EXAMPLES_RNG_H
#define TIDEGATE_EXAMPLES_RNG_H

#include <cstdint>
#include <utility>
#include <vector>

namespace examples {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // In [0, bound); the modulo bias (< 2^-50 for data-set-sized bounds) does not matter here.
  uint64_t below(uint64_t bound) { return next() % bound; }
  template <typename T>
  void shuffle(std::vector<T>& v) {  // Fisher-Yates
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t state_;
};

}  // namespace examples

#endif  // TIDEGATE_EXAMPLES_RNG_H
