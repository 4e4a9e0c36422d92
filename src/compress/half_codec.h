// The frame shared by fp16 and bf16: a payload of one 16-bit float per element,
//   PayloadHeader (codec, input dtype, count) | count x u16, little-endian.
// Conversion kernels live in fp16.cc and bf16.cc; this class does the checks, chunking,
// threads, dtype conversion and the non-finite policy (an element that is or becomes infinite
// or NaN is refused with INVALID_ARGUMENT naming it).
#pragma once

#include <cstdint>

#include "compress/codec.h"

namespace tidegate {

class HalfCodec : public Codec {
 public:
  size_t max_payload_bytes(const TensorView& like) const override;
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  bool deterministic() const override { return true; }

  // Elements per chunk (a conversion buffer of this many u16 lives on the stack).
  static constexpr int64_t kChunk = 2048;

 protected:
  // Converts x[0, n) (n <= kChunk) into out; returns false when an output is infinite or NaN.
  virtual bool to_half(const float* x, int64_t n, uint16_t* out) const = 0;
  // out[i] = value (add: out[i] += value), n <= kChunk.
  virtual void from_half(const uint16_t* in, int64_t n, float* out, bool add) const = 0;
  // True when a converted value is infinite or NaN.
  virtual bool is_nonfinite(uint16_t h) const = 0;

 private:
  Status encode_range(const TensorView& input, int64_t begin, int64_t end, uint8_t* out) const;
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;
};

}  // namespace tidegate
