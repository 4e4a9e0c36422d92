#include "base/wire_header.h"

#include <cstring>

namespace tidegate {

namespace {

template <typename T>
void put(unsigned char*& p, T value) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<unsigned char>(u >> (8 * i));
}

template <typename T>
T get(const unsigned char*& p) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<U>(*p++) << (8 * i));
  return static_cast<T>(u);
}

std::string dtype_text(uint8_t dtype) {
  return dtype_is_valid(dtype) ? dtype_name(static_cast<tidegate_dtype_t>(dtype))
                               : "dtype#" + std::to_string(dtype);
}
std::string op_text(uint8_t op) {
  return reduce_op_is_valid(op) ? reduce_op_name(static_cast<tidegate_reduce_op_t>(op))
                                : "op#" + std::to_string(op);
}

// What the aux field means for this op, for mismatch messages.
const char* aux_field(const WireHeader& h) {
  if (h.op_kind == OpKind::kBroadcast) return "root";
  if (h.op_kind == OpKind::kAllgatherv) return "counts";
  if (h.codec_id != 0) return "algorithm";
  return "aux";
}

}  // namespace

void encode_wire_header(const WireHeader& h, unsigned char out[kWireHeaderBytes]) {
  std::memset(out, 0, kWireHeaderBytes);
  unsigned char* p = out;
  put<uint32_t>(p, h.magic);
  put<uint16_t>(p, h.version);
  put<uint8_t>(p, static_cast<uint8_t>(h.op_kind));
  put<uint8_t>(p, h.dtype);
  put<uint8_t>(p, h.reduce_op);
  put<uint8_t>(p, h.codec_id);
  put<uint16_t>(p, h.flags);
  put<uint64_t>(p, h.comm_id);
  put<uint64_t>(p, h.op_seq);
  put<int64_t>(p, h.count);
  put<uint32_t>(p, h.chunk);
  put<int32_t>(p, h.aux);
  put<uint32_t>(p, h.codec_config_hash);
  put<uint64_t>(p, h.payload_bytes);
  put<uint32_t>(p, h.sender_rank);
  put<uint32_t>(p, h.key_hash);
}

WireHeader decode_wire_header(const unsigned char in[kWireHeaderBytes]) {
  const unsigned char* p = in;
  WireHeader h;
  h.magic = get<uint32_t>(p);
  h.version = get<uint16_t>(p);
  h.op_kind = static_cast<OpKind>(get<uint8_t>(p));
  h.dtype = get<uint8_t>(p);
  h.reduce_op = get<uint8_t>(p);
  h.codec_id = get<uint8_t>(p);
  h.flags = get<uint16_t>(p);
  h.comm_id = get<uint64_t>(p);
  h.op_seq = get<uint64_t>(p);
  h.count = get<int64_t>(p);
  h.chunk = get<uint32_t>(p);
  h.aux = get<int32_t>(p);
  h.codec_config_hash = get<uint32_t>(p);
  h.payload_bytes = get<uint64_t>(p);
  h.sender_rank = get<uint32_t>(p);
  h.key_hash = get<uint32_t>(p);
  return h;
}

std::string describe_op(const WireHeader& h) {
  std::string text = std::string(op_kind_name(h.op_kind)) + " op #" + std::to_string(h.op_seq);
  text += " (" + dtype_text(h.dtype);
  if (h.op_kind == OpKind::kAllreduce || h.op_kind == OpKind::kReduceScatter) {
    text += " " + op_text(h.reduce_op);
  }
  text += ", count " + std::to_string(h.count);
  if (h.codec_id != 0) text += ", codec #" + std::to_string(h.codec_id);
  return text + ")";
}

Status check_wire_header(const WireHeader& expected, const WireHeader& received, int my_rank,
                         int peer) {
  const std::string me = "rank " + std::to_string(my_rank);
  const std::string them = "rank " + std::to_string(peer);
  if (received.magic != kWireMagic) {
    return protocol_error("message from " + them + " to " + me +
                          " does not start with the tidegate magic: the peer is not a tidegate "
                          "rank of this job, or the stream is corrupted");
  }
  if (received.version != kWireVersion) {
    return protocol_error(them + " speaks wire version " + std::to_string(received.version) +
                          " but " + me + " speaks " + std::to_string(kWireVersion) +
                          ": run the same tidegate build on every rank");
  }
  if (received.comm_id != expected.comm_id) {
    return protocol_error("message from " + them + " belongs to another communicator: " + me +
                          " expected communicator " + std::to_string(expected.comm_id) + ", got " +
                          std::to_string(received.comm_id));
  }
  if (received.sender_rank != static_cast<uint32_t>(peer)) {
    return protocol_error("message from " + them + " to " + me + " claims sender rank " +
                          std::to_string(received.sender_rank));
  }

  // The collective's own fields: a mismatch means the ranks posted different collectives.
  auto mismatch = [&](const char* field, const std::string& mine, const std::string& theirs) {
    return mismatch_error(describe_op(expected) + ": " + me + " posted " + field + "=" + mine +
                          " but " + them + " posted " + field + "=" + theirs + " (field '" + field +
                          "', " + them + "'s op is " + describe_op(received) +
                          "). Every rank must post the same collectives in the same order "
                          "with the same arguments.");
  };
  if (received.op_seq != expected.op_seq)
    return mismatch("op_seq", std::to_string(expected.op_seq), std::to_string(received.op_seq));
  if (received.op_kind != expected.op_kind)
    return mismatch("op kind", op_kind_name(expected.op_kind), op_kind_name(received.op_kind));
  if (received.dtype != expected.dtype)
    return mismatch("dtype", dtype_text(expected.dtype), dtype_text(received.dtype));
  if (received.reduce_op != expected.reduce_op)
    return mismatch("reduce op", op_text(expected.reduce_op), op_text(received.reduce_op));
  if (received.count != expected.count)
    return mismatch("count", std::to_string(expected.count), std::to_string(received.count));
  if (received.codec_id != expected.codec_id)
    return mismatch("codec", std::to_string(expected.codec_id), std::to_string(received.codec_id));
  if (received.codec_config_hash != expected.codec_config_hash)
    return mismatch("codec config", std::to_string(expected.codec_config_hash),
                    std::to_string(received.codec_config_hash));
  if (received.aux != expected.aux)
    return mismatch(aux_field(expected), std::to_string(expected.aux),
                    std::to_string(received.aux));
  if (received.key_hash != expected.key_hash)
    return mismatch("tensor key", std::to_string(expected.key_hash),
                    std::to_string(received.key_hash));
  const uint16_t ef_differs = (received.flags ^ expected.flags) & kWireFlagErrorFeedback;
  if (ef_differs != 0) {
    auto on_off = [](uint16_t flags) { return (flags & kWireFlagErrorFeedback) ? "on" : "off"; };
    return mismatch("error feedback", on_off(expected.flags), on_off(received.flags));
  }
  if (received.chunk != expected.chunk)
    return mismatch("chunk", std::to_string(expected.chunk), std::to_string(received.chunk));
  if (received.flags != expected.flags)
    return mismatch("flags", std::to_string(expected.flags), std::to_string(received.flags));
  if (expected.bounded_payload()) {
    if (received.payload_bytes > expected.payload_bytes) {
      return protocol_error(describe_op(expected) + ": " + them + " sent a payload of " +
                            std::to_string(received.payload_bytes) + " bytes to " + me +
                            ", over the bound of " + std::to_string(expected.payload_bytes) +
                            " bytes for this message (field 'payload bytes'): the peer's "
                            "encoder broke its size bound, or the stream is corrupted");
    }
  } else if (received.payload_bytes != expected.payload_bytes) {
    return mismatch("payload bytes", std::to_string(expected.payload_bytes),
                    std::to_string(received.payload_bytes));
  }
  return Status::ok();
}

}  // namespace tidegate
