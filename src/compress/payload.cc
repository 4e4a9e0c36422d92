#include "compress/payload.h"

namespace tidegate {

void PayloadWriter::header(const PayloadHeader& h) {
  put<uint16_t>(kPayloadMagic);
  put<uint8_t>(kPayloadVersion);
  put<uint8_t>(static_cast<uint8_t>(h.codec));
  put<uint8_t>(h.dtype);
  put<uint8_t>(h.flags);
  put<uint16_t>(0);
  put<int64_t>(h.count);
}

bool PayloadWriter::reserve(size_t n) {
  if (overflow_ || n > capacity_ - size_) {
    overflow_ = true;
    return false;
  }
  return true;
}

void PayloadWriter::bytes(const void* data, size_t n) {
  if (!reserve(n)) return;
  if (n > 0) std::memcpy(out_ + size_, data, n);
  size_ += n;
}

uint8_t* PayloadWriter::claim(size_t n) {
  if (!reserve(n)) return nullptr;
  uint8_t* p = out_ + size_;
  size_ += n;
  return p;
}

Status PayloadWriter::status() const {
  if (overflow_) {
    return internal_error("codec payload exceeded its own max_payload_bytes bound (capacity " +
                          std::to_string(capacity_) + ")");
  }
  return Status::ok();
}

Status PayloadReader::take(size_t n, const uint8_t** p) {
  if (n > size_ - offset_) {
    return protocol_error("codec payload truncated: needs " + std::to_string(n) +
                          " more bytes at offset " + std::to_string(offset_) + " of " +
                          std::to_string(size_));
  }
  *p = data_ + offset_;
  offset_ += n;
  return Status::ok();
}

Status PayloadReader::header(CodecId expected_codec, int64_t expected_count, PayloadHeader* out) {
  uint16_t magic = 0;
  uint8_t version = 0;
  uint8_t codec = 0;
  uint16_t reserved = 0;
  TG_RETURN_IF_ERROR(get(&magic));
  if (magic != kPayloadMagic) return protocol_error("codec payload has a bad magic number");
  TG_RETURN_IF_ERROR(get(&version));
  if (version != kPayloadVersion) {
    return protocol_error("codec payload format version " + std::to_string(version) + " is not " +
                          std::to_string(kPayloadVersion) +
                          ": run the same tidegate on every rank");
  }
  TG_RETURN_IF_ERROR(get(&codec));
  if (codec != static_cast<uint8_t>(expected_codec)) {
    return protocol_error(std::string("codec payload is for codec #") + std::to_string(codec) +
                          ", expected " + codec_name(expected_codec));
  }
  TG_RETURN_IF_ERROR(get(&out->dtype));
  TG_RETURN_IF_ERROR(get(&out->flags));
  TG_RETURN_IF_ERROR(get(&reserved));
  TG_RETURN_IF_ERROR(get(&out->count));
  if (out->count != expected_count) {
    return protocol_error("codec payload holds " + std::to_string(out->count) +
                          " elements but the tensor has " + std::to_string(expected_count));
  }
  out->codec = expected_codec;
  return Status::ok();
}

}  // namespace tidegate
