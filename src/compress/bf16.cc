// bf16: every element rounded to bfloat16 (float32's exponent, 7 fraction bits), to nearest
// with ties to even (collectives/half.h, shared with the reductions). Only values within half
// an ulp of FLT_MAX round up to infinity; they and non-finite input are refused (non-finite
// policy, codec.h). Spec: bf16 (no parameters).
#include <memory>
#include <string>

#include "compress/codec_spec.h"
#include "compress/half_codec.h"
#include "compress/simd.h"
#include "numeric/half.h"

namespace tidegate {

namespace {

TG_VECTOR_CLONES bool floats_to_bf16(const float* TG_RESTRICT x, int64_t n,
                                     uint16_t* TG_RESTRICT out) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t b = float_to_bf16(x[i]);
    bad |= (b & 0x7fffu) >= 0x7f80u;
    out[i] = b;
  }
  return bad == 0;
}

TG_VECTOR_CLONES void bf16_to_floats(const uint16_t* TG_RESTRICT in, int64_t n,
                                     float* TG_RESTRICT out, bool add) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] += bf16_to_float(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
  }
}

class Bf16Codec final : public HalfCodec {
 public:
  CodecId id() const override { return CodecId::kBf16; }
  std::string spec() const override { return "bf16"; }

 protected:
  bool to_half(const float* x, int64_t n, uint16_t* out) const override {
    return floats_to_bf16(x, n, out);
  }
  void from_half(const uint16_t* in, int64_t n, float* out, bool add) const override {
    bf16_to_floats(in, n, out, add);
  }
  bool is_nonfinite(uint16_t b) const override { return (b & 0x7fffu) >= 0x7f80u; }
};

}  // namespace

Status make_bf16_codec(CodecParams&, std::unique_ptr<Codec>* codec) {
  *codec = std::make_unique<Bf16Codec>();
  return Status::ok();
}

}  // namespace tidegate
