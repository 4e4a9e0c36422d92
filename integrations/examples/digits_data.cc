#include "digits_data.h"

#include "rng.h"

#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>

namespace digits {

void Dataset::append(const Dataset& from, int i) {
  x.insert(x.end(), from.row(i), from.row(i) + kFeatures);
  y.push_back(from.y[i]);
}

namespace {

[[noreturn]] void fail(const std::string& path, long line, const std::string& what) {
  throw std::runtime_error(path + ":" + std::to_string(line) + ": " + what);
}

// Parses one integer field of `text` starting at *cursor and moves past it and its separator.
long parse_field(const char** cursor, const std::string& path, long line) {
  char* end = nullptr;
  const long value = std::strtol(*cursor, &end, 10);
  if (end == *cursor) fail(path, line, "expected a number");
  if (*end == ',') ++end;
  *cursor = end;
  return value;
}

}  // namespace

Dataset load_csv_gz(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno) +
                             " (pass the path of integrations/examples/data/digits.csv.gz)");
  }
  Dataset data;
  char text[4096];
  long line = 0;
  while (gzgets(file.get(), text, sizeof text) != nullptr) {
    ++line;
    const size_t length = std::strlen(text);
    if (length + 1 == sizeof text && text[length - 1] != '\n') fail(path, line, "line too long");
    if (text[0] == '\n' || text[0] == '\0') continue;
    const char* cursor = text;
    for (int f = 0; f < kFeatures; ++f) {
      const long pixel = parse_field(&cursor, path, line);
      if (pixel < 0 || pixel > 16) fail(path, line, "pixel value out of 0..16");
      data.x.push_back(static_cast<float>(pixel) / 16.0f);
    }
    const long label = parse_field(&cursor, path, line);
    if (label < 0 || label >= kClasses) fail(path, line, "label out of 0..9");
    while (*cursor == '\r' || *cursor == '\n' || *cursor == ' ') ++cursor;
    if (*cursor != '\0') fail(path, line, "more than 65 fields");
    data.y.push_back(static_cast<int>(label));
  }
  int error = Z_OK;
  const char* message = gzerror(file.get(), &error);
  if (error != Z_OK && error != Z_STREAM_END) fail(path, line, std::string("zlib: ") + message);
  if (data.size() == 0) fail(path, line, "no samples");
  return data;
}

void split(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train, Dataset* test) {
  std::vector<int> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  examples::Rng rng(seed);
  rng.shuffle(order);
  const int test_count = static_cast<int>(all.size() * test_fraction);
  *train = Dataset{};
  *test = Dataset{};
  for (int i = 0; i < all.size(); ++i) (i < test_count ? test : train)->append(all, order[i]);
}

}  // namespace digits
