// fp16: every element rounded to IEEE binary16, to nearest with ties to even (the conversions of
// collectives/half.h, shared with the reductions so that every part of tidegate rounds alike;
// half_vec.h evaluates them sixteen at a time).
// Finite values beyond +-65504 round to infinity and are therefore refused (non-finite policy,
// codec.h): use bf16 for gradients of that size. Spec: fp16 (no parameters).
#include <memory>
#include <string>

#include "compress/codec_spec.h"
#include "compress/half_codec.h"
#include "compress/half_vec.h"
#include "compress/simd.h"
#include "numeric/half.h"

namespace tidegate {

namespace {

TG_VECTOR_CLONES bool floats_to_fp16(const float* TG_RESTRICT x, int64_t n,
                                     uint16_t* TG_RESTRICT out) {
  return half_vec::floats_to_halves<false>(x, n, out);  // false: infinity or NaN, input or overflow
}

TG_VECTOR_CLONES void fp16_to_floats(const uint16_t* TG_RESTRICT in, int64_t n,
                                     float* TG_RESTRICT out, bool add) {
  half_vec::halves_to_floats(in, n, out, add);
}

class Fp16Codec final : public HalfCodec {
 public:
  CodecId id() const override { return CodecId::kFp16; }
  std::string spec() const override { return "fp16"; }

 protected:
  bool to_half(const float* x, int64_t n, uint16_t* out) const override {
    return floats_to_fp16(x, n, out);
  }
  void from_half(const uint16_t* in, int64_t n, float* out, bool add) const override {
    fp16_to_floats(in, n, out, add);
  }
  bool is_nonfinite(uint16_t h) const override { return (h & 0x7fffu) >= 0x7c00u; }
};

}  // namespace

Status make_fp16_codec(CodecParams&, std::unique_ptr<Codec>* codec) {
  *codec = std::make_unique<Fp16Codec>();
  return Status::ok();
}

}  // namespace tidegate
