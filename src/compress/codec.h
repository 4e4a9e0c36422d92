// The codec (compressor) interface (DESIGN.md "Codec"): encode a tensor into a self-describing,
// little-endian payload; decode or decode-add it back; an exact bound on payload size; whether
// payloads can be summed without decoding; whether encoding is deterministic. One codec per
// file in this folder; make_codec() parses spec strings such as "topk:ratio=0.01".
//
// Error feedback (residual memory) is not a codec's business: error_feedback.h applies it
// around any codec, keyed by tensor key, in the collective layer.
//
// Thread safety: a Codec object is immutable after creation; encode/decode may run concurrently
// on different buffers. Randomness comes only from EncodeContext::seed, which every rank derives
// identically from (job seed, op sequence number, tensor key), never from a global RNG.
//
// Non-finite policy (every codec, one rule): encode() refuses input it cannot represent
// faithfully - a NaN or an infinity, or a finite value whose encoding would overflow (fp16 beyond
// +-65504, a float64 beyond float32's range, a bucket whose norm, range or sum overflows float32)
// - with INVALID_ARGUMENT naming the codec, the first offending element (lowest index) and its
// value. Nothing non-finite is ever propagated, so error feedback never stores a poisoned
// residual (error_feedback.h leaves the residual unchanged on any error). Decoding a payload that
// encode() produced gives finite values; a decoder rejects a payload whose scales are not finite
// as a PROTOCOL error. Element values of the raw formats (none, fp16, bf16) are decoded as they
// are.
//
// Dtypes: inputs and outputs may be float32, float64, float16 or bfloat16 in host memory. Codecs
// compute in float32 (float64 input is rounded to float32 first). Quantised payloads do not
// depend on the dtype, so a payload may be decoded into a tensor of another floating dtype;
// `none` carries raw elements and needs the same dtype on both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

// Stable codec identifiers: part of the payload format and of wire headers.
enum class CodecId : uint8_t {
  kNone = 0,
  kFp16 = 1,
  kBf16 = 2,
  kTopK = 3,
  kRandomK = 4,
  kThreshold = 5,
  kQsgd = 6,
  kMaxMin = 7,
  kTernGrad = 8,
  kSignSgd = 9,
  kEfSign = 10,
  kOneBit = 11,
  kPowerSgd = 12,
};

const char* codec_name(CodecId id);

struct EncodeContext {
  uint64_t seed = 0;  // for stochastic codecs; identical on every rank for the same op/tensor
  int threads = 1;    // CPU threads the encoder may use
};

// A payload's bytes, for the calls that take several.
struct PayloadSpan {
  const uint8_t* data = nullptr;
  size_t bytes = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  // Canonical spec string with every parameter spelled out ("qsgd:bits=4,bucket=512").
  virtual std::string spec() const = 0;
  // Hash of the canonical spec, carried in wire headers so ranks with different settings fail
  // with a mismatch instead of decoding each other's payloads wrongly.
  uint32_t config_hash() const;

  // Exact upper bound of encode()'s output size for a tensor like `like` (count, dtype, shape).
  virtual size_t max_payload_bytes(const TensorView& like) const = 0;

  // Encodes `input` into out[0, capacity) and sets *written. capacity must be at least
  // max_payload_bytes(input). Errors: UNSUPPORTED dtype, INVALID_ARGUMENT (e.g. NaN/Inf under
  // the codec's documented policy, or a missing 2-D shape for matrix codecs).
  virtual Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                        size_t capacity, size_t* written) const = 0;

  // Decodes a payload into output (overwriting) or adds it into output. The payload is
  // untrusted: a truncated or malformed payload, a wrong version, an out-of-range index or a
  // count that does not match output is a PROTOCOL error, never an out-of-bounds access.
  virtual Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const = 0;
  virtual Status decode_add(const uint8_t* payload, size_t bytes,
                            const TensorView& output) const = 0;

  // Sums payloads (each an encoding of a tensor like `output`) into a float32 output: element
  // i becomes ((0 + d_0[i]) + d_1[i]) + ... in the order given, then / divisor unless divisor
  // is 1: the bits of zeroing the output, decode_add() of each payload in turn and dividing
  // every element, so ranks summing the same payloads in the same order agree bit for bit.
  // A payload that does not decode: its error, with *failed its position (the output is then
  // undefined). Sparse codecs override it with one pass over the output.
  virtual Status decode_sum(const PayloadSpan* payloads, size_t n, const TensorView& output,
                            float divisor, size_t* failed) const;

  // Subtracts the decoded payload from a float32 `residual` in place, bitwise as
  // residual[i] - decode(payload)[i] for every i: how a sender's error feedback removes what it
  // sent. Sparse codecs (decodes_sparse()) touch only the payload's entries, O(k) where a dense
  // decode and a subtraction would pass over the whole tensor twice; for the others it is
  // UNSUPPORTED (the caller decodes into scratch and subtracts).
  virtual bool decodes_sparse() const { return false; }
  virtual Status decode_subtract(const uint8_t* payload, size_t bytes,
                                 const TensorView& residual) const;

  // True when two payloads of this codec (same tensor, same op) can be combined into one
  // payload of the sum without decoding (signSGD vote counts, shared-scale quantisation).
  virtual bool payloads_summable() const { return false; }
  // True when encode() gives the same bytes for the same input regardless of the seed.
  virtual bool deterministic() const = 0;

  // True when the codec is biased (sign codecs, nearest rounding) and converges only with
  // error feedback; the collective layer then applies error_feedback.h around it.
  virtual bool wants_error_feedback() const { return false; }

  // For summable codecs: combines payloads a and b (each from encode() or from an earlier
  // sum_payloads()) for a tensor like `like` into out[0, capacity), setting *written. What the
  // sum means is the codec's (signsgd: vote counts; decode gives the majority sign). Errors:
  // UNSUPPORTED when !payloads_summable(), PROTOCOL for malformed inputs, INVALID_ARGUMENT
  // when capacity is below max_summed_payload_bytes(like, parties of a + parties of b).
  virtual Status sum_payloads(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes,
                              const TensorView& like, uint8_t* out, size_t capacity,
                              size_t* written) const;
  // Exact upper bound of the size of a sum of `parties` encoded payloads (parties >= 1);
  // max_payload_bytes(like) for parties == 1, 0 when !payloads_summable().
  virtual size_t max_summed_payload_bytes(const TensorView& like, int64_t parties) const;

  // For summable codecs whose sum means less than it holds (signsgd: the majority needs one or
  // two bits per element, the counts log2(parties + 1)): rewrites a final sum (from
  // sum_payloads(), or an encoding when parties == 1) as a payload that decodes to the same
  // bits in fewer bytes, for a sum that is sent on but no longer summed (the owners' allgather
  // of the summable allreduce). The condensed payload can be decoded, not summed. Errors:
  // UNSUPPORTED when max_condensed_payload_bytes() is 0, PROTOCOL for a malformed sum,
  // INVALID_ARGUMENT when capacity is below max_condensed_payload_bytes(like, its parties).
  virtual Status condense_sum(const uint8_t* sum, size_t bytes, const TensorView& like,
                              uint8_t* out, size_t capacity, size_t* written) const;
  // Exact upper bound of a condensed sum of `parties` payloads; 0 when the codec has none.
  virtual size_t max_condensed_payload_bytes(const TensorView&, int64_t) const { return 0; }
};

// Parses a spec string ("none", "fp16", "topk:ratio=0.01", "qsgd:bits=4,bucket=512", ...) and
// builds the codec. CONFIG error naming the spec, the parameter and the accepted values.
Status make_codec(const std::string& spec, std::unique_ptr<Codec>* codec);

// Names of the registered codecs, in registration order (for help texts and tidegate-info).
std::vector<std::string> registered_codecs();

}  // namespace tidegate
