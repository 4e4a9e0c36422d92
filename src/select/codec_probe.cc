#include "select/codec_probe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "compress/topk.h"
#include "select/probe_measure.h"

namespace tidegate {

namespace {

constexpr int64_t kElements = int64_t{1} << 20;       // 4 MiB of float32: past most L2 caches
constexpr int64_t kFirstElements = int64_t{1} << 18;  // the first pass's quarter of it
constexpr double kNominalGBps = 1.0;
constexpr int kFullPasses = 2;

struct Measured {
  std::string name;
  std::unique_ptr<Codec> codec;
  std::vector<uint8_t> payload;
  double encode_GBps = 0, decode_GBps = 0;
  bool failed = false;
};

// Top-k's encode as the compressed collectives run it: a fresh selection every
// TopKCodec::kReuseSteps steps of a tensor, and the steps between starting from the threshold
// the step before left (one pass instead of a sample and a pass). Timed once each; the figure
// is their mean over one period, in milliseconds. Priced as the fresh selection alone, top-k
// lost the auto plan's 16-256 MiB to qsgd at 10 Gbit/s, where it ran 1.2-1.5x faster.
bool time_topk_encode(const TopKCodec& topk, const TensorView& in, std::vector<uint8_t>* payload,
                      size_t* written, double* ms) {
  uint32_t threshold = 0;  // none yet: a fresh selection, which leaves one
  auto began = Clock::now();
  if (!topk.encode_reusing_threshold(in, &threshold, payload->data(), payload->size(), written)
           .is_ok())
    return false;
  const double fresh_ms = ms_since(began);
  began = Clock::now();
  if (!topk.encode_reusing_threshold(in, &threshold, payload->data(), payload->size(), written)
           .is_ok())
    return false;
  const double reused_ms = ms_since(began);
  *ms = (fresh_ms + (TopKCodec::kReuseSteps - 1) * reused_ms) / TopKCodec::kReuseSteps;
  return true;
}

// One timed encode and decode-add of `in`; false when the codec refused it.
bool time_once(Measured* m, const TensorView& in, const TensorView& out, double* encode_GBps,
               double* decode_GBps) {
  const double gb = static_cast<double>(in.count) * sizeof(float) / 1e9;
  size_t written = 0;
  double encode_ms = 0;
  if (m->codec->id() == CodecId::kTopK) {
    if (!time_topk_encode(static_cast<const TopKCodec&>(*m->codec), in, &m->payload, &written,
                          &encode_ms))
      return false;
  } else {
    const auto began = Clock::now();
    if (!m->codec->encode(in, EncodeContext{}, m->payload.data(), m->payload.size(), &written)
             .is_ok())
      return false;
    encode_ms = ms_since(began);
  }
  *encode_GBps = gb / std::max(encode_ms / 1000.0, 1e-9);
  auto began = Clock::now();
  if (!m->codec->decode_add(m->payload.data(), written, out).is_ok()) return false;
  *decode_GBps = gb / std::max(ms_since(began) / 1000.0, 1e-9);
  return true;
}

// A view of the first `count` elements, shaped as PowerSGD's matrix of 1024 columns.
TensorView matrix_view(float* data, int64_t count) {
  TensorView view;
  view.data = data;
  view.count = count;
  view.dtype = TIDEGATE_FLOAT32;
  view.cols = 1024;
  view.rows = count / 1024;
  return view;
}

}  // namespace

std::vector<CodecFigures> measure_codecs(double budget_ms) {
  const auto start = Clock::now();
  std::vector<float> input(static_cast<size_t>(kElements)), output(input.size());
  // Gradient-like values: small and of both signs, with one large value in 61 (what the
  // sparsifiers select). Integer hashing, not sin(): the fill is part of the budget.
  for (int64_t i = 0; i < kElements; ++i) {
    const uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    const float unit = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
    input[i] = unit * (i % 61 == 0 ? 2.0f : 0.02f);
  }
  const TensorView full_in = matrix_view(input.data(), kElements);
  const TensorView full_out = matrix_view(output.data(), kElements);
  std::vector<Measured> codecs;
  for (const std::string& name : registered_codecs()) {
    Measured m;
    m.name = name;
    if (!make_codec(name, &m.codec).is_ok()) continue;
    m.payload.resize(m.codec->max_payload_bytes(full_in));
    codecs.push_back(std::move(m));
  }
  // Pass 0 runs every codec once on a quarter of the tensor, so that a slow or loaded machine
  // (a sanitizer build) still gets a figure for each; passes 1 and 2 on the whole tensor, each
  // only when the pass before it says it fits in what is left of the budget. Pass 1 replaces the
  // quarter's figures (at 1 MiB some caches still help); pass 2 keeps the better of two runs
  // (the first pays for page faults). No codec is started once the budget is spent.
  for (int pass = 0; pass <= kFullPasses; ++pass) {
    const TensorView in = pass == 0 ? matrix_view(input.data(), kFirstElements) : full_in;
    const TensorView out = pass == 0 ? matrix_view(output.data(), kFirstElements) : full_out;
    const double began_ms = ms_since(start);
    size_t reached = 0;
    for (Measured& m : codecs) {
      if (ms_since(start) >= budget_ms) break;
      ++reached;
      double encode = 0, decode = 0;
      if (m.failed) continue;
      if (!time_once(&m, in, out, &encode, &decode)) {
        m.failed = true;
        continue;
      }
      const bool replace = pass <= 1;
      m.encode_GBps = replace ? encode : std::max(m.encode_GBps, encode);
      m.decode_GBps = replace ? decode : std::max(m.decode_GBps, decode);
    }
    const double pass_ms = ms_since(start) - began_ms;
    const double next_ms = pass == 0 ? pass_ms * (kElements / kFirstElements) : pass_ms;
    if (reached < codecs.size() || ms_since(start) + next_ms > budget_ms) break;
  }
  std::vector<CodecFigures> figures;
  for (const Measured& m : codecs) {
    if (m.failed || m.encode_GBps <= 0 || m.decode_GBps <= 0) continue;
    figures.push_back({m.name, m.encode_GBps, m.decode_GBps});
  }
  return figures;
}

CodecFigures nominal_codec_figures(const std::string& codec) {
  return {codec, kNominalGBps, kNominalGBps};
}

}  // namespace tidegate
