#include "compress/half_codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "compress/float_io.h"
#include "compress/parallel.h"
#include "compress/payload.h"

namespace tidegate {

size_t HalfCodec::max_payload_bytes(const TensorView& like) const {
  return kPayloadHeaderBytes + static_cast<size_t>(like.count) * sizeof(uint16_t);
}

Status HalfCodec::encode_range(const TensorView& input, int64_t begin, int64_t end,
                               uint8_t* out) const {
  float scratch[kChunk];
  uint16_t halves[kChunk];  // aligned staging: the payload itself may be at any address
  for (int64_t chunk = begin; chunk < end; ++chunk) {
    const int64_t first = chunk * kChunk;
    const int64_t n = std::min(kChunk, input.count - first);
    const float* x = floats_at(input, first, n, scratch);
    if (!to_half(x, n, halves)) {
      for (int64_t i = 0; i < n; ++i) {
        if (is_nonfinite(halves[i]))
          return nonfinite_input(id(), first + i, element_value(input, first + i));
      }
    }
    std::memcpy(out + static_cast<size_t>(first) * sizeof(uint16_t), halves,
                static_cast<size_t>(n) * sizeof(uint16_t));
  }
  return Status::ok();
}

Status HalfCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                         size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), input, "input"));
  const size_t total = max_payload_bytes(input);
  TG_CHECK_ARG(capacity >= total, std::string(codec_name(id())) + " codec: output capacity " +
                                      std::to_string(capacity) + " is below max_payload_bytes " +
                                      std::to_string(total));
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(input.dtype), 0, input.count});
  uint8_t* data = writer.claim(static_cast<size_t>(input.count) * sizeof(uint16_t));
  TG_RETURN_IF_ERROR(writer.status());
  const int64_t chunks = (input.count + kChunk - 1) / kChunk;
  TG_RETURN_IF_ERROR(parallel_ranges(context.threads, chunks, 128, [&](int64_t begin, int64_t end) {
    return encode_range(input, begin, end, data);
  }));
  *written = writer.size();
  return Status::ok();
}

Status HalfCodec::decode(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_into(payload, bytes, output, false);
}

Status HalfCodec::decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_into(payload, bytes, output, true);
}

Status HalfCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                              bool add) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), output, "output"));
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(id(), output.count, &header));
  const size_t data_bytes = static_cast<size_t>(output.count) * sizeof(uint16_t);
  if (reader.remaining() != data_bytes) {
    return protocol_error(std::string(codec_name(id())) + " payload is " + std::to_string(bytes) +
                          " bytes; " + std::to_string(output.count) + " elements need exactly " +
                          std::to_string(kPayloadHeaderBytes + data_bytes));
  }
  const uint8_t* data = nullptr;
  TG_RETURN_IF_ERROR(reader.take(data_bytes, &data));
  uint16_t halves[kChunk];
  float scratch[kChunk];
  const bool direct = output.dtype == TIDEGATE_FLOAT32;
  for (int64_t first = 0; first < output.count; first += kChunk) {
    const int64_t n = std::min(kChunk, output.count - first);
    std::memcpy(halves, data + static_cast<size_t>(first) * sizeof(uint16_t),
                static_cast<size_t>(n) * sizeof(uint16_t));
    if (direct) {
      from_half(halves, n, static_cast<float*>(output.data) + first, add);
    } else {
      from_half(halves, n, scratch, false);
      store_floats(scratch, n, output, first, add);
    }
  }
  return Status::ok();
}

}  // namespace tidegate
