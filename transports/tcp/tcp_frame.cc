#include "transports/tcp/tcp_frame.h"

#include <cstring>

namespace tidegate::tcp {

namespace {

void put32(unsigned char*& p, uint32_t v) {
  for (int i = 0; i < 4; ++i) *p++ = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char*& p, uint64_t v) {
  for (int i = 0; i < 8; ++i) *p++ = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get32(const unsigned char*& p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(*p++) << (8 * i);
  return v;
}
uint64_t get64(const unsigned char*& p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(*p++) << (8 * i);
  return v;
}

const char* frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::kData:
      return "DATA";
    case FrameType::kRts:
      return "RTS";
    case FrameType::kRtr:
      return "RTR";
    case FrameType::kAbort:
      return "ABORT";
    case FrameType::kBye:
      return "BYE";
    case FrameType::kPing:
      return "PING";
  }
  return "?";
}

}  // namespace

size_t encode_frame_prefix(const FrameHeader& frame, const WireHeader* wire, unsigned char* out) {
  unsigned char* p = out;
  put32(p, kFrameMagic);
  *p++ = static_cast<unsigned char>(frame.type);
  *p++ = 0;
  *p++ = 0;
  *p++ = 0;
  put32(p, frame.channel);
  put32(p, frame.status_code);
  put64(p, frame.seq);
  put64(p, frame.offset);
  put64(p, frame.length);
  put64(p, frame.total);
  if (!frame_has_wire_header(frame.type)) return kFrameHeaderBytes;
  encode_wire_header(*wire, p);
  return kMaxFramePrefixBytes;
}

Status decode_frame_header(const unsigned char in[kFrameHeaderBytes], int peer, FrameHeader* out) {
  const unsigned char* p = in;
  const std::string from = "rank " + std::to_string(peer);
  if (get32(p) != kFrameMagic) {
    return protocol_error("the connection from " + from +
                          " lost frame alignment (no frame magic): the stream is corrupted");
  }
  const uint8_t type = *p;
  p += 4;  // type and three reserved bytes
  FrameHeader f;
  f.channel = get32(p);
  f.status_code = get32(p);
  f.seq = get64(p);
  f.offset = get64(p);
  f.length = get64(p);
  f.total = get64(p);
  if (type < static_cast<uint8_t>(FrameType::kData) ||
      type > static_cast<uint8_t>(FrameType::kPing)) {
    return protocol_error(from + " sent a frame of unknown type " + std::to_string(type));
  }
  f.type = static_cast<FrameType>(type);

  bool bounded = true;
  switch (f.type) {
    case FrameType::kData:
      // offset + length <= total, written so that no sum can overflow.
      bounded = f.length <= kMaxFramePayloadBytes && f.offset <= f.total &&
                f.length <= f.total - f.offset;
      break;
    case FrameType::kRts:
      bounded = f.length == 0 && f.total > kEagerMaxBytes;
      break;
    case FrameType::kAbort:
      bounded = f.length <= kMaxAbortMessageBytes;
      break;
    case FrameType::kRtr:
    case FrameType::kBye:
    case FrameType::kPing:
      bounded = f.length == 0;
      break;
  }
  if (!bounded) {
    return protocol_error(from + " sent an out-of-bounds " + describe_frame(f));
  }
  *out = f;
  return Status::ok();
}

std::string describe_frame(const FrameHeader& f) {
  std::string text = std::string(frame_type_name(f.type)) + " frame (channel " +
                     std::to_string(f.channel) + ", message " + std::to_string(f.seq);
  if (f.type == FrameType::kData) {
    text += ", bytes [" + std::to_string(f.offset) + ", +" + std::to_string(f.length) + ") of " +
            std::to_string(f.total);
  } else if (f.type == FrameType::kRts) {
    text += ", " + std::to_string(f.total) + " bytes";
  } else if (f.type == FrameType::kAbort) {
    text += ", message of " + std::to_string(f.length) + " bytes";
  }
  return text + ")";
}

}  // namespace tidegate::tcp
