// TernGrad (Wen et al., 2017): scaled ternary quantisation, stochastic and unbiased. Each
// bucket keeps s = max |x|; each element becomes s * sign(x) * b with b ~ Bernoulli(|x| / s),
// so E[decode(x)] = x. Two bits per element: bit 0 = b, bit 1 = sign (x < 0).
//
// Spec: terngrad:bucket=512   (a multiple of 8 up to 2^24; the paper's per-layer scale is a
//       bucket as large as the tensor)
// Payload: the BucketedCodec layout with one scale (s) per bucket and 2-bit codes computed by
// sign_magnitude.h with one level.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "compress/bitpack.h"
#include "compress/bucketed_codec.h"
#include "compress/codec_spec.h"
#include "compress/lane_reduce.h"
#include "compress/sign_magnitude.h"

namespace tidegate {

namespace {

constexpr int64_t kSubBlock = kMaxGroupRun;  // sign_magnitude_codes() takes at most this many
constexpr unsigned kBits = 2;

// One bucket; false when an element is not finite (then so is max |x|).
TG_INLINE bool terngrad_bucket(const float* x, int64_t n, uint64_t first, uint64_t seed,
                               uint8_t* scale_out, uint8_t* packed) {
  const float scale = lane_max_abs(x, n);
  if (!std::isfinite(scale)) return false;
  std::memcpy(scale_out, &scale, sizeof scale);
  uint8_t codes[kSubBlock];
  for (int64_t offset = 0; offset < n;) {
    const uint64_t index = first + static_cast<uint64_t>(offset);
    const int64_t m = counter_run_length(index, n - offset, kSubBlock);
    if (scale == 0) {
      std::memset(codes, 0, static_cast<size_t>(m));
    } else {
      sign_magnitude_codes(x + offset, m, scale, 1, kBits - 1, static_cast<uint32_t>(index),
                           stream_key(seed, index >> 32), codes);
    }
    pack_codes(codes, m, kBits, packed + static_cast<size_t>(offset / 8) * kBits);
    offset += m;
  }
  return true;
}

TG_VECTOR_CLONES int64_t terngrad_encode(const float* x, int64_t n, int64_t bucket, uint64_t first,
                                         uint64_t seed, uint8_t* scales, uint8_t* packed) {
  int64_t b = 0;
  for (int64_t offset = 0; offset < n; offset += bucket, ++b) {
    const int64_t m = n - offset < bucket ? n - offset : bucket;
    if (!terngrad_bucket(x + offset, m, first + static_cast<uint64_t>(offset), seed,
                         scales + b * sizeof(float),
                         packed + static_cast<size_t>(offset / 8) * kBits)) {
      return b;
    }
  }
  return b;
}

TG_VECTOR_CLONES void terngrad_decode(const uint8_t* scales, const uint8_t* packed, int64_t n,
                                      int64_t bucket, float* out, bool add) {
  uint8_t codes[kSubBlock];
  for (int64_t first = 0, b = 0; first < n; first += bucket, ++b) {
    float scale;
    std::memcpy(&scale, scales + b * sizeof(float), sizeof scale);
    const int64_t end = n - first < bucket ? n : first + bucket;
    for (int64_t offset = first; offset < end; offset += kSubBlock) {
      const int64_t m = end - offset < kSubBlock ? end - offset : kSubBlock;
      unpack_codes(packed + static_cast<size_t>(offset / 8) * kBits, m, kBits, codes);
      sign_magnitude_values(codes, m, scale, kBits - 1, out + offset, add);
    }
  }
}

class TernGradCodec final : public BucketedCodec {
 public:
  explicit TernGradCodec(int64_t bucket)
      : BucketedCodec({CodecId::kTernGrad, kBits, bucket, 1, 0}) {}

  std::string spec() const override { return "terngrad:bucket=" + std::to_string(format().bucket); }
  bool deterministic() const override { return false; }

 protected:
  int64_t encode_buckets(const float* x, int64_t n, uint64_t first, uint64_t seed, uint8_t* scales,
                         uint8_t* packed) const override {
    return terngrad_encode(x, n, format().bucket, first, seed, scales, packed);
  }
  void decode_buckets(const uint8_t* scales, const uint8_t* packed, int64_t n, float* out,
                      bool add) const override {
    terngrad_decode(scales, packed, n, format().bucket, out, add);
  }
  bool scales_valid(const float* scales) const override {
    return scales[0] >= 0 && std::isfinite(scales[0]);
  }
};

}  // namespace

Status make_terngrad_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  int64_t bucket = 0;
  TG_RETURN_IF_ERROR(params.get_int("bucket", 512, 8, BucketedCodec::kMaxBucket, &bucket));
  if (bucket % 8 != 0) return params.invalid("bucket", "a multiple of 8 from 8 to 16777216");
  *codec = std::make_unique<TernGradCodec>(bucket);
  return Status::ok();
}

}  // namespace tidegate
