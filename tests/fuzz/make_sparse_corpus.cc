// Writes the seed corpora of the sparsifier and PowerSGD fuzz targets (corpus/<codec>_decode/):
// one payload per layout and edge a decoder must handle - index list, bitmap and dense sparse
// layouts, the approximate-mode flag, k = 0, an empty tensor, random-k's scaled and dense forms,
// PowerSGD's factors, its dense fallback and a 1 x n row. Deterministic: rerunning gives the
// same files. Usage: make_sparse_corpus <tests/fuzz/corpus directory>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace {

using tidegate::Codec;
using tidegate::TensorView;

// Encodes n values of sin(0.7 i) (1 + i mod 5), shaped rows x (n / rows) when rows > 0, and
// writes the payload to dir/name. False when the spec or the encode fails.
bool emit(const std::string& dir, const char* name, const char* spec, int64_t n, int64_t rows = 0) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.7 * i) * (1 + i % 5));
  std::unique_ptr<Codec> codec;
  if (!tidegate::make_codec(spec, &codec).is_ok()) return false;
  TensorView t;
  t.data = x.data();
  t.count = n;
  if (rows > 0) {
    t.rows = rows;
    t.cols = n / rows;
  }
  std::vector<uint8_t> out(codec->max_payload_bytes(t));
  size_t written = 0;
  if (!codec->encode(t, tidegate::EncodeContext{3, 1}, out.data(), out.size(), &written).is_ok())
    return false;
  std::ofstream file(dir + "/" + name, std::ios::binary);
  file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(written));
  return static_cast<bool>(file);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <tests/fuzz/corpus directory>\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const std::string topk = root + "/topk_decode", randomk = root + "/randomk_decode";
  const std::string threshold = root + "/threshold_decode", powersgd = root + "/powersgd_decode";
  const bool ok = emit(topk, "indices", "topk:k=16", 300) &&
                  emit(topk, "approx", "topk:k=16,mode=approx", 300) &&
                  emit(topk, "bitmap", "topk:k=100", 300) &&
                  emit(topk, "dense", "topk:k=400", 40) && emit(topk, "empty", "topk:k=16", 0) &&
                  emit(topk, "none_kept", "topk:k=0", 50) &&
                  emit(randomk, "sparse", "randomk:ratio=0.1", 300) &&
                  emit(randomk, "scaled", "randomk:ratio=0.1,unbiased=1", 300) &&
                  emit(randomk, "dense", "randomk:k=100", 50) &&
                  emit(threshold, "indices", "threshold:value=4.5", 300) &&
                  emit(threshold, "bitmap", "threshold:value=1", 300) &&
                  emit(threshold, "dense", "threshold:value=0", 60) &&
                  emit(powersgd, "factors", "powersgd:rank=2", 600, 30) &&
                  emit(powersgd, "dense", "powersgd:rank=2", 16, 4) &&
                  emit(powersgd, "row", "powersgd:rank=2", 50, 1);
  if (!ok)
    std::fprintf(
        stderr, "make_sparse_corpus: a payload could not be written (do the directories exist?)\n");
  return ok ? 0 : 1;
}
