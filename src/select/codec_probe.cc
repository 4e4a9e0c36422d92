#include "select/codec_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

#include "compress/codec.h"

namespace tidegate {

namespace {

constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB of float32: past most L2 caches
constexpr double kNominalGBps = 1.0;

double best_seconds(int runs, const std::function<bool()>& work) {
  double best = INFINITY;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!work()) return INFINITY;
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

std::vector<CodecFigures> measure_codecs() {
  std::vector<float> input(static_cast<size_t>(kElements)), output(input.size());
  for (int64_t i = 0; i < kElements; ++i) {
    input[i] = std::sin(static_cast<float>(i) * 0.37f) * (i % 61 == 0 ? 1.0f : 0.01f);
  }
  TensorView in;
  in.data = input.data();
  in.count = kElements;
  in.dtype = TIDEGATE_FLOAT32;
  in.rows = 1024;  // PowerSGD's matrix
  in.cols = kElements / 1024;
  TensorView out = in;
  out.data = output.data();
  const double dense_gb = static_cast<double>(kElements) * sizeof(float) / 1e9;
  std::vector<CodecFigures> figures;
  for (const std::string& name : registered_codecs()) {
    std::unique_ptr<Codec> codec;
    if (!make_codec(name, &codec).is_ok()) continue;
    std::vector<uint8_t> payload(codec->max_payload_bytes(in));
    size_t written = 0;
    const double encode = best_seconds(2, [&] {
      return codec->encode(in, EncodeContext{}, payload.data(), payload.size(), &written).is_ok();
    });
    const double decode = best_seconds(2, [&] {
      return codec->decode_add(payload.data(), written, out).is_ok();
    });
    if (!std::isfinite(encode) || !std::isfinite(decode)) continue;
    figures.push_back({name, dense_gb / std::max(encode, 1e-9), dense_gb / std::max(decode, 1e-9)});
  }
  return figures;
}

CodecFigures nominal_codec_figures(const std::string& codec) {
  return {codec, kNominalGBps, kNominalGBps};
}

}  // namespace tidegate
