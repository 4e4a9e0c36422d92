// The frame shared by the bucketed quantisers (qsgd, maxmin, terngrad, onebit): the tensor is
// cut into buckets of `bucket` elements (a multiple of 8, so every bucket's codes start on a
// byte boundary); each bucket has a few float32 scales and one code of `bits` bits per element.
//
// Payload (little-endian):
//   PayloadHeader (16 bytes: codec, input dtype, count)
//   u8 bits | u8 variant | u16 scales per bucket | u32 bucket
//   scales: buckets x (scales per bucket) float32, bucket by bucket
//   codes:  packed_bytes(count, bits) bytes, LSB-first (bitpack.h), bucket after bucket
// Its size is exact and known from the count, so decoders check it before reading.
//
// This class owns everything but the arithmetic: input checks, the non-finite policy, dtype
// conversion, threads, layout and payload validation. A codec supplies encode_buckets() and
// decode_buckets() (loops over buckets inside one vectorised kernel in its own file) and,
// optionally, a check of decoded scales.
#pragma once

#include <cstdint>

#include "compress/codec.h"

namespace tidegate {

class BucketedCodec : public Codec {
 public:
  struct Format {
    CodecId id = CodecId::kNone;
    unsigned bits = 8;     // code width, 1..8
    int64_t bucket = 512;  // elements per bucket, a multiple of 8
    unsigned scales = 1;   // float32 scales per bucket
    uint8_t variant = 0;   // a codec-specific setting recorded in the payload (maxmin rounding)
  };
  // Largest bucket: keeps per-thread scratch bounded and fits the u32 field.
  static constexpr int64_t kMaxBucket = int64_t{1} << 24;

  CodecId id() const override { return format_.id; }
  size_t max_payload_bytes(const TensorView& like) const override;
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override;

 protected:
  explicit BucketedCodec(const Format& format) : format_(format) {}
  const Format& format() const { return format_; }

  // Quantises the buckets covering x[0, n), x[0] being element `first` of the tensor (the start
  // of a bucket); n is a multiple of the bucket size unless the range ends the tensor. For each
  // bucket b it writes format().scales float32 scales at scales + b * scales * 4 and the codes
  // at packed + (b * bucket * bits) / 8 (unaligned addresses: use memcpy). Returns the number
  // of buckets done: all of them, or the index of the first bucket holding a non-finite value
  // or whose scale overflows float32 (encode() then finds the element and reports it). The
  // loop over buckets lives in the codec's vectorised kernel, so one call covers many buckets.
  virtual int64_t encode_buckets(const float* x, int64_t n, uint64_t first, uint64_t seed,
                                 uint8_t* scales, uint8_t* packed) const = 0;
  // Decodes the buckets covering out[0, n): out[i] = value of code i (add: out[i] += value),
  // with scales and codes laid out as above, scales already checked by scales_valid().
  virtual void decode_buckets(const uint8_t* scales, const uint8_t* packed, int64_t n, float* out,
                              bool add) const = 0;
  // Whether scales read from an untrusted payload are possible encoder output (default: finite).
  virtual bool scales_valid(const float* scales) const;

 private:
  struct Layout;
  Layout layout(int64_t count) const;
  Status encode_range(const TensorView& input, uint64_t seed, int64_t begin, int64_t end,
                      uint8_t* scales, uint8_t* codes) const;
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;

  Format format_;
};

}  // namespace tidegate
