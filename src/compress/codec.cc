#include "compress/codec.h"

#include <algorithm>

#include "compress/codec_spec.h"

namespace tidegate {

const char* codec_name(CodecId id) {
  switch (id) {
    case CodecId::kNone:
      return "none";
    case CodecId::kFp16:
      return "fp16";
    case CodecId::kBf16:
      return "bf16";
    case CodecId::kTopK:
      return "topk";
    case CodecId::kRandomK:
      return "randomk";
    case CodecId::kThreshold:
      return "threshold";
    case CodecId::kQsgd:
      return "qsgd";
    case CodecId::kMaxMin:
      return "maxmin";
    case CodecId::kTernGrad:
      return "terngrad";
    case CodecId::kSignSgd:
      return "signsgd";
    case CodecId::kEfSign:
      return "efsign";
    case CodecId::kOneBit:
      return "onebit";
    case CodecId::kPowerSgd:
      return "powersgd";
  }
  return "unknown-codec";
}

uint32_t Codec::config_hash() const {
  // FNV-1a over the canonical spec: stable across builds and platforms.
  uint32_t hash = 2166136261u;
  for (unsigned char c : spec()) hash = (hash ^ c) * 16777619u;
  return hash;
}

Status Codec::sum_payloads(const uint8_t*, size_t, const uint8_t*, size_t, const TensorView&,
                           uint8_t*, size_t, size_t*) const {
  return unsupported(std::string("codec ") + codec_name(id()) +
                     " payloads cannot be summed without decoding");
}

Status Codec::decode_sum(const PayloadSpan* payloads, size_t n, const TensorView& output,
                         float divisor, size_t* failed) const {
  TG_CHECK_ARG(output.dtype == TIDEGATE_FLOAT32 && output.count >= 0 &&
                   (output.data != nullptr || output.count == 0),
               std::string("codec ") + codec_name(id()) + ": decode_sum needs a float32 output");
  float* out = static_cast<float*>(output.data);
  std::fill(out, out + output.count, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    Status st = decode_add(payloads[i].data, payloads[i].bytes, output);
    if (!st.is_ok()) {
      *failed = i;
      return st;
    }
  }
  if (divisor != 1.0f) {
    for (int64_t i = 0; i < output.count; ++i) out[i] /= divisor;
  }
  return Status::ok();
}

Status Codec::decode_subtract(const uint8_t*, size_t, const TensorView&) const {
  return unsupported(std::string("codec ") + codec_name(id()) +
                     " does not decode sparse: subtract a dense decode instead");
}

Status Codec::condense_sum(const uint8_t*, size_t, const TensorView&, uint8_t*, size_t,
                           size_t*) const {
  return unsupported(std::string("codec ") + codec_name(id()) + " has no condensed sums");
}

size_t Codec::max_summed_payload_bytes(const TensorView& like, int64_t parties) const {
  return payloads_summable() && parties == 1 ? max_payload_bytes(like) : 0;
}

std::vector<std::string> registered_codecs() {
  size_t entries = 0;
  const CodecTableEntry* table = codec_table(&entries);
  std::vector<std::string> names;
  for (size_t i = 0; i < entries; ++i) names.emplace_back(table[i].name);
  return names;
}

Status make_codec(const std::string& spec, std::unique_ptr<Codec>* codec) {
  std::string name;
  CodecParams params;
  TG_RETURN_IF_ERROR(CodecParams::parse(spec, &name, &params));
  size_t entries = 0;
  const CodecTableEntry* table = codec_table(&entries);
  for (size_t i = 0; i < entries; ++i) {
    if (name != table[i].name) continue;
    std::unique_ptr<Codec> made;
    TG_RETURN_IF_ERROR(table[i].factory(params, &made));
    TG_RETURN_IF_ERROR(params.finish());
    *codec = std::move(made);
    return Status::ok();
  }
  std::string known;
  for (size_t i = 0; i < entries; ++i) known += (i > 0 ? ", " : "") + std::string(table[i].name);
  return config_error("codec spec \"" + spec + "\": unknown codec \"" + name +
                      "\"; known codecs: " + known);
}

}  // namespace tidegate
