// 1-bit quantisation with per-bucket means (Seide et al., 2014, "1-bit SGD"): each element keeps
// one bit, x < 0; the decoder returns the mean of the bucket's non-negative elements for a 0 bit
// and the mean of its negative elements for a 1 bit. Deterministic and biased: meant to run with
// error feedback, as in the paper.
//
// Spec: onebit:bucket=512   (a multiple of 8 up to 2^24)
// Payload: the BucketedCodec layout with two scales per bucket, {mean of x >= 0, mean of x < 0}
// (0 for an empty side), each the double sum in lane order (lane_reduce.h) divided by the count
// and rounded to float32, and 1-bit codes.
#include <cmath>
#include <memory>
#include <string>

#include "compress/bitpack.h"
#include "compress/bucketed_codec.h"
#include "compress/codec_spec.h"
#include "compress/lane_reduce.h"
#include "compress/sign_bits.h"

namespace tidegate {

namespace {

constexpr int64_t kSubBlock = 1024;

// One bucket; false when an element is not finite (then so is one of the sums).
TG_INLINE bool onebit_bucket(const float* TG_RESTRICT x, int64_t n, uint8_t* scales,
                             uint8_t* packed) {
  double positive = 0, negative = 0;
  int64_t negatives = 0;
  lane_sign_sums(x, n, &positive, &negative, &negatives);
  if (!std::isfinite(positive) || !std::isfinite(negative)) return false;
  const float means[2] = {
      negatives < n ? static_cast<float>(positive / static_cast<double>(n - negatives)) : 0.0f,
      negatives > 0 ? static_cast<float>(negative / static_cast<double>(negatives)) : 0.0f};
  std::memcpy(scales, means, sizeof means);
  uint8_t codes[kSubBlock];
  for (int64_t offset = 0; offset < n; offset += kSubBlock) {
    const int64_t m = n - offset < kSubBlock ? n - offset : kSubBlock;
    for (int64_t j = 0; j < m; ++j) codes[j] = x[offset + j] < 0 ? 1 : 0;
    pack_codes(codes, m, 1, packed + offset / 8);
  }
  return true;
}

TG_VECTOR_CLONES int64_t onebit_encode(const float* x, int64_t n, int64_t bucket, uint8_t* scales,
                                       uint8_t* packed) {
  int64_t b = 0;
  for (int64_t offset = 0; offset < n; offset += bucket, ++b) {
    const int64_t m = n - offset < bucket ? n - offset : bucket;
    if (!onebit_bucket(x + offset, m, scales + b * 2 * sizeof(float), packed + offset / 8))
      return b;
  }
  return b;
}

TG_VECTOR_CLONES void onebit_decode(const uint8_t* scales, const uint8_t* packed, int64_t n,
                                    int64_t bucket, float* TG_RESTRICT out, bool add) {
  for (int64_t first = 0, b = 0; first < n; first += bucket, ++b) {
    float means[2];
    std::memcpy(means, scales + b * sizeof means, sizeof means);
    const float positive = means[0], negative = means[1];
    const int64_t end = n - first < bucket ? n : first + bucket;
    for (int64_t offset = first; offset < end; offset += kSubBlock) {
      const int64_t m = end - offset < kSubBlock ? end - offset : kSubBlock;
      unpack_choices(packed + offset / 8, m, positive, negative, out + offset, add);
    }
  }
}

class OneBitCodec final : public BucketedCodec {
 public:
  explicit OneBitCodec(int64_t bucket) : BucketedCodec({CodecId::kOneBit, 1, bucket, 2, 0}) {}

  std::string spec() const override { return "onebit:bucket=" + std::to_string(format().bucket); }
  bool deterministic() const override { return true; }
  bool wants_error_feedback() const override { return true; }

 protected:
  int64_t encode_buckets(const float* x, int64_t n, uint64_t, uint64_t, uint8_t* scales,
                         uint8_t* packed) const override {
    return onebit_encode(x, n, format().bucket, scales, packed);
  }
  void decode_buckets(const uint8_t* scales, const uint8_t* packed, int64_t n, float* out,
                      bool add) const override {
    onebit_decode(scales, packed, n, format().bucket, out, add);
  }
  bool scales_valid(const float* scales) const override {
    return std::isfinite(scales[0]) && std::isfinite(scales[1]) && scales[0] >= 0 && scales[1] <= 0;
  }
};

}  // namespace

Status make_onebit_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  int64_t bucket = 0;
  TG_RETURN_IF_ERROR(params.get_int("bucket", 512, 8, BucketedCodec::kMaxBucket, &bucket));
  if (bucket % 8 != 0) return params.invalid("bucket", "a multiple of 8 from 8 to 16777216");
  *codec = std::make_unique<OneBitCodec>(bucket);
  return Status::ok();
}

}  // namespace tidegate
