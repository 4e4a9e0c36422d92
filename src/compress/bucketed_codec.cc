#include "compress/bucketed_codec.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compress/float_io.h"
#include "compress/parallel.h"
#include "compress/payload.h"

namespace tidegate {

namespace {
constexpr size_t kParamBytes = 8;
// Buckets per thread below which threads cost more than they save (~256 Ki elements).
constexpr int64_t kMinElementsPerThread = int64_t{1} << 18;
}  // namespace

struct BucketedCodec::Layout {
  int64_t buckets = 0;
  size_t scale_bytes = 0;
  size_t code_bytes = 0;
  size_t total = 0;
};

BucketedCodec::Layout BucketedCodec::layout(int64_t count) const {
  Layout l;
  l.buckets = (count + format_.bucket - 1) / format_.bucket;
  l.scale_bytes = static_cast<size_t>(l.buckets) * format_.scales * sizeof(float);
  l.code_bytes = packed_bytes(static_cast<uint64_t>(count), format_.bits);
  l.total = kPayloadHeaderBytes + kParamBytes + l.scale_bytes + l.code_bytes;
  return l;
}

size_t BucketedCodec::max_payload_bytes(const TensorView& like) const {
  return layout(like.count).total;
}

bool BucketedCodec::scales_valid(const float* scales) const {
  for (unsigned s = 0; s < format_.scales; ++s) {
    if (!std::isfinite(scales[s])) return false;
  }
  return true;
}

Status BucketedCodec::encode_range(const TensorView& input, uint64_t seed, int64_t begin,
                                   int64_t end, uint8_t* scales, uint8_t* codes) const {
  const int64_t bucket = format_.bucket;
  const size_t scale_bytes = format_.scales * sizeof(float);
  std::vector<float> scratch;
  // float32 input: one kernel call for the whole range; other dtypes: a bucket at a time
  // through a float32 copy.
  const int64_t step = input.dtype == TIDEGATE_FLOAT32 ? end - begin : 1;
  if (step == 1) scratch.resize(static_cast<size_t>(bucket));
  for (int64_t b = begin; b < end; b += step) {
    const int64_t first = b * bucket;
    const int64_t n = std::min(step * bucket, input.count - first);
    const float* x = floats_at(input, first, n, scratch.data());
    const int64_t done = encode_buckets(x, n, static_cast<uint64_t>(first), seed,
                                        scales + static_cast<size_t>(b) * scale_bytes,
                                        codes + static_cast<size_t>(first / 8) * format_.bits);
    if (done * bucket >= n) continue;
    // Bucket b + done failed: a non-finite element, or finite values whose scale overflows.
    const int64_t bad_first = first + done * bucket;
    const int64_t bad_n = std::min(bucket, input.count - bad_first);
    const int64_t bad = first_nonfinite(x + done * bucket, bad_n);
    if (bad >= 0)
      return nonfinite_input(id(), bad_first + bad, element_value(input, bad_first + bad));
    return invalid_argument(
        std::string(codec_name(id())) + " codec: the scale of the bucket of elements [" +
        std::to_string(bad_first) + ", " + std::to_string(bad_first + bad_n) +
        ") overflows float32 (values too large to quantise; the residual was left unchanged)");
  }
  return Status::ok();
}

Status BucketedCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                             size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), input, "input"));
  const Layout l = layout(input.count);
  TG_CHECK_ARG(capacity >= l.total, std::string(codec_name(id())) + " codec: output capacity " +
                                        std::to_string(capacity) + " is below max_payload_bytes " +
                                        std::to_string(l.total));
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(input.dtype), 0, input.count});
  writer.put<uint8_t>(static_cast<uint8_t>(format_.bits));
  writer.put<uint8_t>(format_.variant);
  writer.put<uint16_t>(static_cast<uint16_t>(format_.scales));
  writer.put<uint32_t>(static_cast<uint32_t>(format_.bucket));
  uint8_t* scales = writer.claim(l.scale_bytes);
  uint8_t* codes = writer.claim(l.code_bytes);
  TG_RETURN_IF_ERROR(writer.status());
  TG_RETURN_IF_ERROR(parallel_ranges(
      context.threads, l.buckets, std::max<int64_t>(1, kMinElementsPerThread / format_.bucket),
      [&](int64_t begin, int64_t end) {
        return encode_range(input, context.seed, begin, end, scales, codes);
      }));
  *written = writer.size();
  return Status::ok();
}

Status BucketedCodec::decode(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_into(payload, bytes, output, false);
}

Status BucketedCodec::decode_add(const uint8_t* payload, size_t bytes,
                                 const TensorView& output) const {
  return decode_into(payload, bytes, output, true);
}

Status BucketedCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                                  bool add) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), output, "output"));
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(id(), output.count, &header));
  uint8_t bits = 0, variant = 0;
  uint16_t scale_count = 0;
  uint32_t bucket = 0;
  TG_RETURN_IF_ERROR(reader.get(&bits));
  TG_RETURN_IF_ERROR(reader.get(&variant));
  TG_RETURN_IF_ERROR(reader.get(&scale_count));
  TG_RETURN_IF_ERROR(reader.get(&bucket));
  if (bits != format_.bits || variant != format_.variant || scale_count != format_.scales ||
      bucket != static_cast<uint64_t>(format_.bucket)) {
    return protocol_error(
        std::string(codec_name(id())) + " payload has bits=" + std::to_string(bits) +
        " bucket=" + std::to_string(bucket) + " variant=" + std::to_string(variant) +
        ", but the decoder is " + spec() + ": every rank must use the same codec spec");
  }
  const Layout l = layout(output.count);
  if (reader.remaining() != l.scale_bytes + l.code_bytes) {
    return protocol_error(std::string(codec_name(id())) + " payload is " + std::to_string(bytes) +
                          " bytes; " + std::to_string(output.count) + " elements need exactly " +
                          std::to_string(l.total));
  }
  const uint8_t* scales = nullptr;
  const uint8_t* codes = nullptr;
  TG_RETURN_IF_ERROR(reader.take(l.scale_bytes, &scales));
  TG_RETURN_IF_ERROR(reader.take(l.code_bytes, &codes));
  // Validate every scale before writing: decode_add must not leave a half-added tensor.
  float s[4];
  for (int64_t b = 0; b < l.buckets; ++b) {
    std::memcpy(s, scales + static_cast<size_t>(b) * format_.scales * sizeof(float),
                format_.scales * sizeof(float));
    if (!scales_valid(s)) {
      return protocol_error(std::string(codec_name(id())) +
                            " payload has invalid scales in bucket " + std::to_string(b));
    }
  }
  if (output.dtype == TIDEGATE_FLOAT32) {
    decode_buckets(scales, codes, output.count, static_cast<float*>(output.data), add);
    return Status::ok();
  }
  std::vector<float> scratch(static_cast<size_t>(format_.bucket));
  for (int64_t b = 0; b < l.buckets; ++b) {
    const int64_t first = b * format_.bucket;
    const int64_t n = std::min(format_.bucket, output.count - first);
    decode_buckets(scales + static_cast<size_t>(b) * format_.scales * sizeof(float),
                   codes + static_cast<size_t>(first / 8) * format_.bits, n, scratch.data(), false);
    store_floats(scratch.data(), n, output, first, add);
  }
  return Status::ok();
}

}  // namespace tidegate
