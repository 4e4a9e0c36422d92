#include "bootstrap/tcp_store_protocol.h"

namespace tidegate {

namespace {

// Fixed little-endian encoding, independent of the host's byte order.
void append_le(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t read_le(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return value;
}

// A cursor over the buffer that reports "need more" instead of reading past the end.
class Reader {
 public:
  explicit Reader(const std::string& buffer) : buffer_(buffer) {}
  bool has(size_t n) const { return buffer_.size() - offset_ >= n; }
  uint64_t take_le(int bytes) {
    uint64_t v = read_le(buffer_.data() + offset_, bytes);
    offset_ += static_cast<size_t>(bytes);
    return v;
  }
  std::string take_bytes(size_t n) {
    std::string s = buffer_.substr(offset_, n);
    offset_ += n;
    return s;
  }
  size_t offset() const { return offset_; }

 private:
  const std::string& buffer_;
  size_t offset_ = 0;
};

}  // namespace

ParseOutcome parse_store_request(const std::string& buffer, StoreRequest* request, size_t* consumed,
                                 std::string* error) {
  Reader in(buffer);
  if (!in.has(1)) return ParseOutcome::kNeedMore;
  const char kind = static_cast<char>(in.take_le(1));
  if (kind != kStoreRequestSet && kind != kStoreRequestGet) {
    *error = "unknown request kind byte " + std::to_string(static_cast<unsigned char>(kind));
    return ParseOutcome::kInvalid;
  }
  if (!in.has(4)) return ParseOutcome::kNeedMore;
  const uint64_t key_bytes = in.take_le(4);
  if (key_bytes > kMaxStoreKeyBytes) {
    *error = "key of " + std::to_string(key_bytes) + " bytes exceeds the limit of " +
             std::to_string(kMaxStoreKeyBytes);
    return ParseOutcome::kInvalid;
  }
  if (!in.has(key_bytes)) return ParseOutcome::kNeedMore;
  std::string key = in.take_bytes(key_bytes);
  if (kind == kStoreRequestGet) {
    if (!in.has(8)) return ParseOutcome::kNeedMore;
    const uint64_t timeout_ms = in.take_le(8);
    if (timeout_ms > static_cast<uint64_t>(INT64_MAX)) {
      *error = "negative get timeout for key '" + key + "'";
      return ParseOutcome::kInvalid;
    }
    request->timeout_ms = static_cast<int64_t>(timeout_ms);
    request->value.clear();
  } else {
    if (!in.has(4)) return ParseOutcome::kNeedMore;
    const uint64_t value_bytes = in.take_le(4);
    if (value_bytes > kMaxStoreValueBytes) {
      *error = "value of " + std::to_string(value_bytes) + " bytes for key '" + key +
               "' exceeds the limit of " + std::to_string(kMaxStoreValueBytes);
      return ParseOutcome::kInvalid;
    }
    if (!in.has(value_bytes)) return ParseOutcome::kNeedMore;
    request->value = in.take_bytes(value_bytes);
    request->timeout_ms = 0;
  }
  request->kind = kind;
  request->key = std::move(key);
  *consumed = in.offset();
  return ParseOutcome::kComplete;
}

std::string encode_set_request(const std::string& key, const std::string& value) {
  std::string out(1, kStoreRequestSet);
  append_le(&out, key.size(), 4);
  out += key;
  append_le(&out, value.size(), 4);
  out += value;
  return out;
}

std::string encode_get_request(const std::string& key, int64_t timeout_ms) {
  std::string out(1, kStoreRequestGet);
  append_le(&out, key.size(), 4);
  out += key;
  append_le(&out, static_cast<uint64_t>(timeout_ms < 0 ? 0 : timeout_ms), 8);
  return out;
}

std::string encode_store_response(char status, const std::string& payload) {
  std::string out(1, status);
  append_le(&out, payload.size(), 4);
  out += payload;
  return out;
}

Status decode_store_response_header(const char* header, char* status, size_t* payload_bytes) {
  const char s = header[0];
  const uint64_t length = read_le(header + 1, 4);
  size_t cap = 0;
  switch (s) {
    case kStoreResponseOk:
      cap = kMaxStoreValueBytes;
      break;
    case kStoreResponseTimeout:
    case kStoreResponseError:
      cap = kMaxStoreErrorBytes;
      break;
    default:
      return protocol_error("store server sent an unknown response status byte " +
                            std::to_string(static_cast<unsigned char>(s)));
  }
  if (length > cap) {
    return protocol_error("store server announced a " + std::to_string(length) +
                          "-byte response, over the limit of " + std::to_string(cap));
  }
  *status = s;
  *payload_bytes = static_cast<size_t>(length);
  return Status::ok();
}

Status check_store_key(const std::string& key) {
  if (key.size() > kMaxStoreKeyBytes) {
    return invalid_argument("store key of " + std::to_string(key.size()) +
                            " bytes exceeds the limit of " + std::to_string(kMaxStoreKeyBytes) +
                            " (key starts '" + key.substr(0, 64) + "')");
  }
  return Status::ok();
}

Status check_store_value(const std::string& key, const std::string& value) {
  TG_RETURN_IF_ERROR(check_store_key(key));
  if (value.size() > kMaxStoreValueBytes) {
    return invalid_argument("store value of " + std::to_string(value.size()) + " bytes for key '" +
                            key + "' exceeds the limit of " + std::to_string(kMaxStoreValueBytes));
  }
  return Status::ok();
}

}  // namespace tidegate
