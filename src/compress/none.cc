// none: the tensor's own bytes, so that "no compression" goes through the same interface, header
// checks and non-finite policy as every codec.
//   PayloadHeader (codec, dtype, count) | count x element, little-endian
// Unlike the quantisers, a `none` payload can only be decoded into a tensor of the dtype it was
// encoded from. Spec: none (no parameters).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/parallel.h"
#include "compress/payload.h"
#include "compress/simd.h"

namespace tidegate {

namespace {

constexpr int64_t kChunk = 16384;

// True when some element of the raw chunk is NaN or infinite (exponent all ones).
TG_VECTOR_CLONES bool any_nonfinite_16(const uint16_t* TG_RESTRICT x, int64_t n,
                                       uint16_t exponent) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (x[i] & exponent) == exponent;
  return bad != 0;
}
TG_VECTOR_CLONES bool any_nonfinite_64(const uint64_t* TG_RESTRICT x, int64_t n) {
  uint64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (x[i] & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
  return bad != 0;
}

bool any_nonfinite(const TensorView& t, int64_t first, int64_t n) {
  switch (t.dtype) {
    case TIDEGATE_FLOAT64:
      return any_nonfinite_64(static_cast<const uint64_t*>(t.data) + first, n);
    case TIDEGATE_FLOAT16:
      return any_nonfinite_16(static_cast<const uint16_t*>(t.data) + first, n, 0x7c00u);
    case TIDEGATE_BFLOAT16:
      return any_nonfinite_16(static_cast<const uint16_t*>(t.data) + first, n, 0x7f80u);
    default:
      return first_nonfinite(static_cast<const float*>(t.data) + first, n) >= 0;
  }
}

class NoneCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kNone; }
  std::string spec() const override { return "none"; }
  bool deterministic() const override { return true; }

  size_t max_payload_bytes(const TensorView& like) const override {
    return kPayloadHeaderBytes + like.bytes();
  }

  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override {
    TG_RETURN_IF_ERROR(check_codec_tensor(id(), input, "input"));
    TG_CHECK_ARG(capacity >= max_payload_bytes(input),
                 "none codec: output capacity " + std::to_string(capacity) +
                     " is below max_payload_bytes " + std::to_string(max_payload_bytes(input)));
    PayloadWriter writer(out, capacity);
    writer.header({id(), static_cast<uint8_t>(input.dtype), 0, input.count});
    uint8_t* data = writer.claim(input.bytes());
    TG_RETURN_IF_ERROR(writer.status());
    const size_t element = input.element_size();
    const int64_t chunks = (input.count + kChunk - 1) / kChunk;
    TG_RETURN_IF_ERROR(
        parallel_ranges(context.threads, chunks, 16, [&](int64_t begin, int64_t end) {
          for (int64_t c = begin; c < end; ++c) {
            const int64_t first = c * kChunk;
            const int64_t n = std::min(kChunk, input.count - first);
            if (any_nonfinite(input, first, n)) {
              for (int64_t i = first; i < first + n; ++i) {
                const double v = element_value(input, i);
                if (!std::isfinite(v)) return nonfinite_input(id(), i, v);
              }
            }
            std::memcpy(data + static_cast<size_t>(first) * element,
                        input.byte_data() + static_cast<size_t>(first) * element,
                        static_cast<size_t>(n) * element);
          }
          return Status::ok();
        }));
    *written = writer.size();
    return Status::ok();
  }

  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, false);
  }
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, true);
  }

 private:
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const {
    TG_RETURN_IF_ERROR(check_codec_tensor(id(), output, "output"));
    PayloadReader reader(payload, bytes);
    PayloadHeader header;
    TG_RETURN_IF_ERROR(reader.header(id(), output.count, &header));
    if (header.dtype != static_cast<uint8_t>(output.dtype)) {
      return protocol_error(std::string("none payload holds dtype #") +
                            std::to_string(header.dtype) + " but the output is " +
                            dtype_name(output.dtype) + ": every rank must use the same dtype");
    }
    if (reader.remaining() != output.bytes()) {
      return protocol_error("none payload is " + std::to_string(bytes) + " bytes; " +
                            std::to_string(output.count) + " " + dtype_name(output.dtype) +
                            " elements need exactly " +
                            std::to_string(kPayloadHeaderBytes + output.bytes()));
    }
    const uint8_t* data = nullptr;
    TG_RETURN_IF_ERROR(reader.take(output.bytes(), &data));
    if (!add) {
      if (output.count > 0) std::memcpy(output.data, data, output.bytes());
      return Status::ok();
    }
    // Add through float chunks: element values are copied out first (the payload may be
    // unaligned), then added with one rounding to the output dtype.
    const size_t element = output.element_size();
    float values[kChunk / 4];
    alignas(8) uint8_t raw[kChunk / 4 * sizeof(double)];
    const int64_t step = kChunk / 4;
    for (int64_t first = 0; first < output.count; first += step) {
      const int64_t n = std::min(step, output.count - first);
      std::memcpy(raw, data + static_cast<size_t>(first) * element,
                  static_cast<size_t>(n) * element);
      if (output.dtype == TIDEGATE_FLOAT64) {  // add in double: no detour through float
        double* o = static_cast<double*>(output.data) + first;
        for (int64_t i = 0; i < n; ++i) {
          double v;
          std::memcpy(&v, raw + i * 8, 8);
          o[i] += v;
        }
        continue;
      }
      TensorView staged = output;
      staged.data = raw;
      staged.count = n;
      load_floats(staged, 0, n, values);
      store_floats(values, n, output, first, true);
    }
    return Status::ok();
  }
};

}  // namespace

Status make_none_codec(CodecParams&, std::unique_ptr<Codec>* codec) {
  *codec = std::make_unique<NoneCodec>();
  return Status::ok();
}

}  // namespace tidegate
