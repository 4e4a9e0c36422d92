// Writes the seed corpora of the quantiser fuzz targets (corpus/<codec>_decode/): payloads
// encoded from a few small tensors (several buckets, a short last bucket, zeros, float16 input,
// a two-voter signsgd sum and its condensed decision) and a few damaged ones. Deterministic:
// rerunning gives the same files. Usage: make_quant_corpus <tests/fuzz/corpus directory>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace {

using tidegate::Codec;
using tidegate::TensorView;

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

std::vector<uint8_t> encode(const Codec& codec, std::vector<float>& x) {
  TensorView t;
  t.data = x.data();
  t.count = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(codec.max_payload_bytes(t));
  size_t written = 0;
  if (!codec.encode(t, tidegate::EncodeContext{7, 1}, out.data(), out.size(), &written).is_ok())
    return {};
  out.resize(written);
  return out;
}

std::vector<float> values(size_t n, unsigned salt) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(static_cast<int>((i * 7919 + salt * 104729) % 2001) - 1000) * 1e-3f;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <tests/fuzz/corpus>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::pair<const char*, const char*> targets[] = {{"none", "none"},
                                                         {"fp16", "fp16"},
                                                         {"bf16", "bf16"},
                                                         {"qsgd", "qsgd:bits=4,bucket=64"},
                                                         {"maxmin", "maxmin:bits=3,bucket=64"},
                                                         {"terngrad", "terngrad:bucket=64"},
                                                         {"signsgd", "signsgd"},
                                                         {"efsign", "efsign"},
                                                         {"onebit", "onebit:bucket=64"}};
  for (const auto& [name, spec] : targets) {
    std::unique_ptr<Codec> codec;
    if (!tidegate::make_codec(spec, &codec).is_ok()) return 1;
    const std::string out = dir + "/" + name + "_decode/";
    std::filesystem::create_directories(out);
    std::vector<float> small = values(5, 1), buckets = values(200, 2), zeros(64, 0.0f);
    const auto a = encode(*codec, small), b = encode(*codec, buckets), c = encode(*codec, zeros);
    write(out + "valid_5", a);
    write(out + "valid_200", b);
    write(out + "valid_zeros_64", c);
    write(out + "truncated",
          std::vector<uint8_t>(b.begin(), b.begin() + static_cast<long>(b.size() / 2)));
    auto version = a;
    version[2] = 9;
    write(out + "bad_version", version);
    if (codec->payloads_summable()) {
      TensorView like;
      like.count = 200;
      std::vector<uint8_t> sum(codec->max_summed_payload_bytes(like, 2));
      size_t written = 0;
      if (!codec
               ->sum_payloads(b.data(), b.size(), b.data(), b.size(), like, sum.data(), sum.size(),
                              &written)
               .is_ok()) {
        return 1;
      }
      sum.resize(written);
      write(out + "valid_votes_2", sum);
      std::vector<uint8_t> decided(codec->max_condensed_payload_bytes(like, 2));
      if (!codec
               ->condense_sum(sum.data(), sum.size(), like, decided.data(), decided.size(),
                              &written)
               .is_ok()) {
        return 1;
      }
      decided.resize(written);
      write(out + "valid_decided_2", decided);
    }
  }
  return 0;
}
