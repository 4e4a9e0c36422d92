// QSGD (Alistarh et al., 2017): bucketed stochastic quantisation, unbiased. Each bucket keeps
// its L2 norm; each element keeps a sign and a level in [0, s], s = 2^(bits-1) - 1, rounded
// up or down at random so that E[decode(x)] = x. bits = 2, 4 or 8 (s = 1, 7, 127).
//
// Spec: qsgd:bits=4,bucket=512   (bits 2|4|8; bucket a multiple of 8 up to 2^24)
// Payload: the BucketedCodec layout with one scale per bucket, the norm (float32, the double
// sum of squares in lane order - lane_reduce.h - square-rooted and rounded to float), and
// sign-magnitude codes (sign_magnitude.h).
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
// Norms at or above 2^127 are refused: level * (norm / s) must stay finite after rounding.
constexpr float kMaxNorm = 0x1p127f;

// One bucket; false when an element is not finite (the sum of squares is then NaN or
// infinite) or the norm is too large.
TG_INLINE bool qsgd_bucket(const float* x, int64_t n, uint64_t first, uint64_t seed, unsigned bits,
                           uint8_t* scale, uint8_t* packed) {
  const double squares = lane_sum_squares(x, n);
  const float norm = static_cast<float>(std::sqrt(squares));
  if (!(squares < static_cast<double>(kMaxNorm) * kMaxNorm && norm < kMaxNorm)) return false;
  std::memcpy(scale, &norm, sizeof norm);
  const int levels = (1 << (bits - 1)) - 1;
  uint8_t codes[kSubBlock];
  for (int64_t offset = 0; offset < n;) {
    const uint64_t index = first + static_cast<uint64_t>(offset);
    const int64_t m = counter_run_length(index, n - offset, kSubBlock);
    if (norm == 0) {
      std::memset(codes, 0, static_cast<size_t>(m));
    } else {
      sign_magnitude_codes(x + offset, m, norm, levels, bits - 1, static_cast<uint32_t>(index),
                           stream_key(seed, index >> 32), codes);
    }
    pack_codes(codes, m, bits, packed + static_cast<size_t>(offset / 8) * bits);
    offset += m;
  }
  return true;
}

TG_VECTOR_CLONES int64_t qsgd_encode(const float* x, int64_t n, int64_t bucket, uint64_t first,
                                     uint64_t seed, unsigned bits, uint8_t* scales,
                                     uint8_t* packed) {
  int64_t b = 0;
  for (int64_t offset = 0; offset < n; offset += bucket, ++b) {
    const int64_t m = n - offset < bucket ? n - offset : bucket;
    if (!qsgd_bucket(x + offset, m, first + static_cast<uint64_t>(offset), seed, bits,
                     scales + b * sizeof(float), packed + static_cast<size_t>(offset / 8) * bits)) {
      return b;
    }
  }
  return b;
}

TG_VECTOR_CLONES void qsgd_decode(const uint8_t* scales, const uint8_t* packed, int64_t n,
                                  int64_t bucket, unsigned bits, float* out, bool add) {
  const float levels = static_cast<float>((1 << (bits - 1)) - 1);
  uint8_t codes[kSubBlock];
  for (int64_t first = 0, b = 0; first < n; first += bucket, ++b) {
    float norm;
    std::memcpy(&norm, scales + b * sizeof(float), sizeof norm);
    const float unit = norm / levels;
    const int64_t end = n - first < bucket ? n : first + bucket;
    for (int64_t offset = first; offset < end; offset += kSubBlock) {
      const int64_t m = end - offset < kSubBlock ? end - offset : kSubBlock;
      unpack_codes(packed + static_cast<size_t>(offset / 8) * bits, m, bits, codes);
      sign_magnitude_values(codes, m, unit, bits - 1, out + offset, add);
    }
  }
}

class QsgdCodec final : public BucketedCodec {
 public:
  QsgdCodec(unsigned bits, int64_t bucket) : BucketedCodec({CodecId::kQsgd, bits, bucket, 1, 0}) {}

  std::string spec() const override {
    return "qsgd:bits=" + std::to_string(format().bits) +
           ",bucket=" + std::to_string(format().bucket);
  }
  bool deterministic() const override { return false; }

 protected:
  int64_t encode_buckets(const float* x, int64_t n, uint64_t first, uint64_t seed, uint8_t* scales,
                         uint8_t* packed) const override {
    return qsgd_encode(x, n, format().bucket, first, seed, format().bits, scales, packed);
  }
  void decode_buckets(const uint8_t* scales, const uint8_t* packed, int64_t n, float* out,
                      bool add) const override {
    qsgd_decode(scales, packed, n, format().bucket, format().bits, out, add);
  }
  bool scales_valid(const float* scales) const override {
    return scales[0] >= 0 && scales[0] < kMaxNorm;
  }
};

}  // namespace

Status make_qsgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  int64_t bits = 0, bucket = 0;
  TG_RETURN_IF_ERROR(params.get_int_choice("bits", 4, {2, 4, 8}, &bits));
  TG_RETURN_IF_ERROR(params.get_int("bucket", 512, 8, BucketedCodec::kMaxBucket, &bucket));
  if (bucket % 8 != 0) return params.invalid("bucket", "a multiple of 8 from 8 to 16777216");
  *codec = std::make_unique<QsgdCodec>(static_cast<unsigned>(bits), bucket);
  return Status::ok();
}

}  // namespace tidegate
