// The 8x8 digits data set: reading the shipped CSV and splitting it the same way on every rank.
#ifndef TIDEGATE_EXAMPLES_DIGITS_DATA_H
#define TIDEGATE_EXAMPLES_DIGITS_DATA_H

#include <cstdint>
#include <string>
#include <vector>

namespace digits {

constexpr int kFeatures = 64;  // 8x8 pixels
constexpr int kClasses = 10;

// Samples stored row-major: sample i's features are x[i*kFeatures .. (i+1)*kFeatures).
struct Dataset {
  std::vector<float> x;  // pixel counts scaled from 0..16 to 0..1
  std::vector<int> y;    // digit 0..9
  int size() const { return static_cast<int>(y.size()); }
  const float* row(int i) const { return x.data() + static_cast<size_t>(i) * kFeatures; }
  void append(const Dataset& from, int i);
};

// Reads a gzip'ed CSV of rows "64 pixel values,label". Throws std::runtime_error naming the file
// and line on anything malformed, so that a truncated download fails loudly, not as a bad model.
Dataset load_csv_gz(const std::string& path);

// Splits `all` into train and test (test_fraction of it, rounded down), shuffled by `seed`.
void split(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train, Dataset* test);

}  // namespace digits

#endif  // TIDEGATE_EXAMPLES_DIGITS_DATA_H
