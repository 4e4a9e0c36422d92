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
constexpr int kPasses = 2;

double seconds_of(const std::function<bool()>& work) {
  const auto start = std::chrono::steady_clock::now();
  if (!work()) return INFINITY;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<CodecFigures> measure_codecs(double budget_ms) {
  const auto start = std::chrono::steady_clock::now();
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
  struct Measured {
    std::string name;
    std::unique_ptr<Codec> codec;
    std::vector<uint8_t> payload;
    double encode_s = INFINITY, decode_s = INFINITY;
    bool failed = false;
  };
  std::vector<Measured> codecs;
  for (const std::string& name : registered_codecs()) {
    Measured m;
    m.name = name;
    if (!make_codec(name, &m.codec).is_ok()) continue;
    codecs.push_back(std::move(m));
  }
  // Passes over every codec, each run timed once; a codec is started only while the budget
  // lasts, and a second pass (the best of two runs: the first one pays for page faults) only
  // when the first pass's time fits in what is left.
  size_t measured = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    const double pass_began_ms = ms_since(start);
    for (size_t i = 0; i < codecs.size(); ++i) {
      if (ms_since(start) >= budget_ms) break;
      Measured& m = codecs[i];
      if (m.failed) continue;
      if (m.payload.empty()) m.payload.resize(m.codec->max_payload_bytes(in));
      size_t written = 0;
      const double encode = seconds_of([&] {
        return m.codec->encode(in, EncodeContext{}, m.payload.data(), m.payload.size(), &written)
            .is_ok();
      });
      const double decode = seconds_of([&] {
        return std::isfinite(encode) && m.codec->decode_add(m.payload.data(), written, out).is_ok();
      });
      if (!std::isfinite(encode) || !std::isfinite(decode)) m.failed = true;
      m.encode_s = std::min(m.encode_s, encode);
      m.decode_s = std::min(m.decode_s, decode);
      if (pass == 0) measured = i + 1;
    }
    const double pass_ms = ms_since(start) - pass_began_ms;
    if (measured < codecs.size() || ms_since(start) + pass_ms > budget_ms) break;
  }
  const double dense_gb = static_cast<double>(kElements) * sizeof(float) / 1e9;
  std::vector<CodecFigures> figures;
  for (const Measured& m : codecs) {
    if (m.failed || !std::isfinite(m.encode_s) || !std::isfinite(m.decode_s)) continue;
    figures.push_back({m.name, dense_gb / std::max(m.encode_s, 1e-9),
                       dense_gb / std::max(m.decode_s, 1e-9)});
  }
  return figures;
}

CodecFigures nominal_codec_figures(const std::string& codec) {
  return {codec, kNominalGBps, kNominalGBps};
}

}  // namespace tidegate
