// libFuzzer target: the TCP transport's frame prefix decoder (transports/tcp/tcp_frame.h) and
// the wire header that follows DATA and RTS frames, on arbitrary bytes from an authenticated but
// hostile or corrupted peer. Seeds: corpus/tcp_frame/. Checks, beyond ASan/UBSan: a frame the
// decoder accepts keeps every bound the receiver relies on (a DATA frame's bytes lie inside its
// message and within one frame's maximum; an RTS announces a message larger than the eager
// limit; control frames carry nothing or at most an abort message), encodes back to the same
// bytes, and can be described; its wire header decodes and re-encodes without loss.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transports/tcp/tcp_frame.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tidegate;
  using namespace tidegate::tcp;
  if (size < kFrameHeaderBytes) return 0;
  FrameHeader frame;
  if (!decode_frame_header(data, 1, &frame).is_ok()) return 0;
  switch (frame.type) {
    case FrameType::kData:
      check(frame.length <= kMaxFramePayloadBytes && frame.offset <= frame.total &&
            frame.offset + frame.length <= frame.total);
      break;
    case FrameType::kRts:
      check(frame.length == 0 && frame.total > kEagerMaxBytes);
      break;
    case FrameType::kAbort:
      check(frame.length <= kMaxAbortMessageBytes);
      break;
    case FrameType::kRtr:
    case FrameType::kBye:
    case FrameType::kPing:
      check(frame.length == 0);
      break;
  }
  check(!describe_frame(frame).empty());
  WireHeader wire;
  const bool has_wire = frame_has_wire_header(frame.type) && size >= kMaxFramePrefixBytes;
  if (has_wire) wire = decode_wire_header(data + kFrameHeaderBytes);
  unsigned char again[kMaxFramePrefixBytes];
  if (frame_has_wire_header(frame.type) && !has_wire) return 0;
  const size_t written = encode_frame_prefix(frame, has_wire ? &wire : nullptr, again);
  // The reserved bytes (after the type) are not kept; everything else round-trips.
  check(std::memcmp(again, data, 5) == 0);
  check(std::memcmp(again + 8, data + 8, kFrameHeaderBytes - 8) == 0);
  if (has_wire) {
    check(written == kMaxFramePrefixBytes);
    const WireHeader decoded = decode_wire_header(again + kFrameHeaderBytes);
    check(std::memcmp(&decoded.count, &wire.count, sizeof wire.count) == 0 &&
          decoded.op_seq == wire.op_seq && decoded.payload_bytes == wire.payload_bytes &&
          decoded.sender_rank == wire.sender_rank && decoded.aux == wire.aux);
  }
  return 0;
}
