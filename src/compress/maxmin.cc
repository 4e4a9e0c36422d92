// Max-min quantisation (as in CGX): each bucket keeps its smallest and largest value, lo and hi,
// and each element a code c in [0, L], L = 2^bits - 1, on the uniform grid lo + c * step,
// step = (hi - lo) / L. Stochastic rounding is unbiased; nearest rounding is deterministic and
// biased (so it asks for error feedback).
//
// Spec: maxmin:bits=4,bucket=512,rounding=stochastic   (bits 1..8; bucket a multiple of 8 up
//       to 2^24; rounding stochastic|nearest)
// The payload definition, which a GPU kernel must follow to produce the same bytes (float32):
//   lo, hi  = min and max in lane order (lane_reduce.h), zeros as +0; scales = {lo, hi}
//   hi == lo: every code is 0
//   t       = (x - lo) * (L / (hi - lo))      when L / (hi - lo) is finite,
//             (x - lo) / (hi - lo) * L        otherwise (a subnormal range)
//   nearest:    c = trunc(min(t + 0.5, L))
//   stochastic: c = trunc(min(t + u, L)),  u = uniform01(mix32(uint32(i) ^ key))  (stochastic.h)
//   decode  = min(lo + c * ((hi - lo) / L), hi)
// Stochastic rounding is unbiased up to the float32 rounding of t + u (2^-16 of a step at
// most). A bucket whose hi - lo overflows float32 is refused (non-finite policy, codec.h).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "compress/bitpack.h"
#include "compress/bucketed_codec.h"
#include "compress/codec_spec.h"
#include "compress/lane_reduce.h"
#include "compress/stochastic.h"
#include "compress/vec16.h"

namespace tidegate {

namespace {

constexpr int64_t kSubBlock = 1024;

// Sixteen elements of the formulas above (vec16.h).
template <bool kStochastic, bool kUseInverse>
struct MaxMinGroup {
  float lo, range, inverse, top;
  uint32_t key;
  TG_INLINE void operator()(const float* x16, uint32_t counter, int32_t* codes16) const {
    using namespace vec16;
    f32 x, u;
    load(x16, x);
    const f32 t = kUseInverse ? (x - lo) * inverse : (x - lo) / range * top;
    if constexpr (kStochastic) {
      uniform(counter, key, u);
    } else {
      u = f32{} + 0.5f;
    }
    f32 s = t + u;
    s = s < top ? s : top;
    store(codes16, __builtin_convertvector(s, i32));
  }
};

template <bool kStochastic>
TG_INLINE void maxmin_codes(const float* x, int64_t m, float lo, float range, float top,
                            uint32_t counter, uint32_t key, int32_t* wide) {
  const float inverse = top / range;
  if (std::isfinite(inverse)) {
    vec16::for_each_group(x, m, counter, wide,
                          MaxMinGroup<kStochastic, true>{lo, range, inverse, top, key});
  } else {
    vec16::for_each_group(x, m, counter, wide,
                          MaxMinGroup<kStochastic, false>{lo, range, inverse, top, key});
  }
}

// One bucket; false when an element is not finite or hi - lo overflows.
TG_INLINE bool maxmin_bucket(const float* x, int64_t n, uint64_t first, uint64_t seed,
                             unsigned bits, bool stochastic, uint8_t* scales, uint8_t* packed) {
  float lo = 0, hi = 0;
  if (!lane_min_max(x, n, &lo, &hi)) return false;
  const float range = hi - lo;
  if (!std::isfinite(range)) return false;
  const float bounds[2] = {lo, hi};
  std::memcpy(scales, bounds, sizeof bounds);
  const float top = static_cast<float>((1 << bits) - 1);
  uint8_t codes[kSubBlock];
  int32_t wide[kSubBlock];
  for (int64_t offset = 0; offset < n;) {
    const uint64_t index = first + static_cast<uint64_t>(offset);
    const int64_t m = counter_run_length(index, n - offset, kSubBlock);
    if (range == 0) {
      std::memset(codes, 0, static_cast<size_t>(m));
    } else {
      const uint32_t key = stream_key(seed, index >> 32);
      if (stochastic) {
        maxmin_codes<true>(x + offset, m, lo, range, top, static_cast<uint32_t>(index), key, wide);
      } else {
        maxmin_codes<false>(x + offset, m, lo, range, top, static_cast<uint32_t>(index), key, wide);
      }
      vec16::narrow_codes(wide, m, codes);
    }
    pack_codes(codes, m, bits, packed + static_cast<size_t>(offset / 8) * bits);
    offset += m;
  }
  return true;
}

TG_VECTOR_CLONES int64_t maxmin_encode(const float* x, int64_t n, int64_t bucket, uint64_t first,
                                       uint64_t seed, unsigned bits, bool stochastic,
                                       uint8_t* scales, uint8_t* packed) {
  int64_t b = 0;
  for (int64_t offset = 0; offset < n; offset += bucket, ++b) {
    const int64_t m = n - offset < bucket ? n - offset : bucket;
    if (!maxmin_bucket(x + offset, m, first + static_cast<uint64_t>(offset), seed, bits, stochastic,
                       scales + b * 2 * sizeof(float),
                       packed + static_cast<size_t>(offset / 8) * bits)) {
      return b;
    }
  }
  return b;
}

TG_VECTOR_CLONES void maxmin_decode(const uint8_t* scales, const uint8_t* packed, int64_t n,
                                    int64_t bucket, unsigned bits, float* TG_RESTRICT out,
                                    bool add) {
  const float levels = static_cast<float>((1 << bits) - 1);
  uint8_t codes[kSubBlock];
  for (int64_t first = 0, b = 0; first < n; first += bucket, ++b) {
    float bounds[2];
    std::memcpy(bounds, scales + b * sizeof bounds, sizeof bounds);
    const float lo = bounds[0], hi = bounds[1];
    const float step = (hi - lo) / levels;
    const int64_t end = n - first < bucket ? n : first + bucket;
    for (int64_t offset = first; offset < end; offset += kSubBlock) {
      const int64_t m = end - offset < kSubBlock ? end - offset : kSubBlock;
      unpack_codes(packed + static_cast<size_t>(offset / 8) * bits, m, bits, codes);
      float* o = out + offset;
      if (add) {
        for (int64_t j = 0; j < m; ++j) {
          const float v = lo + static_cast<float>(codes[j]) * step;
          o[j] += v < hi ? v : hi;
        }
      } else {
        for (int64_t j = 0; j < m; ++j) {
          const float v = lo + static_cast<float>(codes[j]) * step;
          o[j] = v < hi ? v : hi;
        }
      }
    }
  }
}

class MaxMinCodec final : public BucketedCodec {
 public:
  MaxMinCodec(unsigned bits, int64_t bucket, bool stochastic)
      : BucketedCodec(
            {CodecId::kMaxMin, bits, bucket, 2, static_cast<uint8_t>(stochastic ? 1 : 0)}) {}

  std::string spec() const override {
    return "maxmin:bits=" + std::to_string(format().bits) +
           ",bucket=" + std::to_string(format().bucket) +
           ",rounding=" + (stochastic() ? "stochastic" : "nearest");
  }
  bool deterministic() const override { return !stochastic(); }
  bool wants_error_feedback() const override { return !stochastic(); }

 protected:
  bool stochastic() const { return format().variant == 1; }
  int64_t encode_buckets(const float* x, int64_t n, uint64_t first, uint64_t seed, uint8_t* scales,
                         uint8_t* packed) const override {
    return maxmin_encode(x, n, format().bucket, first, seed, format().bits, stochastic(), scales,
                         packed);
  }
  void decode_buckets(const uint8_t* scales, const uint8_t* packed, int64_t n, float* out,
                      bool add) const override {
    maxmin_decode(scales, packed, n, format().bucket, format().bits, out, add);
  }
  bool scales_valid(const float* scales) const override {
    return std::isfinite(scales[0]) && std::isfinite(scales[1]) && scales[0] <= scales[1] &&
           std::isfinite(scales[1] - scales[0]);
  }
};

}  // namespace

Status make_maxmin_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  int64_t bits = 0, bucket = 0;
  std::string rounding;
  TG_RETURN_IF_ERROR(params.get_int("bits", 4, 1, 8, &bits));
  TG_RETURN_IF_ERROR(params.get_int("bucket", 512, 8, BucketedCodec::kMaxBucket, &bucket));
  if (bucket % 8 != 0) return params.invalid("bucket", "a multiple of 8 from 8 to 16777216");
  TG_RETURN_IF_ERROR(
      params.get_choice("rounding", "stochastic", {"stochastic", "nearest"}, &rounding));
  *codec =
      std::make_unique<MaxMinCodec>(static_cast<unsigned>(bits), bucket, rounding == "stochastic");
  return Status::ok();
}

}  // namespace tidegate
