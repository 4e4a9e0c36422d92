// The TCP transport's wire format: every byte on a data connection belongs to a frame.
//
//   frame header (48 bytes, little-endian)
//     u32 magic "TGF1" | u8 type | u8 0 | u16 0 | u32 channel | u32 status code
//     u64 seq | u64 offset | u64 length | u64 total
//   then, for DATA and RTS frames, the 64-byte encoded WireHeader of the message
//   then `length` bytes: payload (DATA) or a UTF-8 message (ABORT)
//
// A message is identified by (channel, seq): seq counts the sender's messages to one peer on
// one channel, so the k-th isend matches the k-th irecv whatever connection carried it. That
// is what lets a large message be cut into stripes spread over several connections: each
// stripe is a DATA frame with its byte offset inside the message and carries the message's
// WireHeader, so the receiver checks the header before storing any byte of any stripe.
//
// Protocol (see tcp_transport.h): messages up to kEagerMaxBytes are sent at once (eager);
// larger ones are announced by an RTS frame and their data flows only after the receiver has
// posted the matching receive and said so with an RTR frame (rendezvous), so large payloads
// never wait in a socket for a receive that is not posted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/wire_header.h"

namespace tidegate::tcp {

inline constexpr uint32_t kFrameMagic = 0x31464754;  // "TGF1" little-endian
inline constexpr size_t kFrameHeaderBytes = 48;
inline constexpr size_t kMaxFramePrefixBytes = kFrameHeaderBytes + kWireHeaderBytes;

// Messages up to this size are sent eagerly; larger ones use the RTS/RTR rendezvous.
inline constexpr size_t kEagerMaxBytes = size_t{128} << 10;
// Messages from this size are striped over all connections to the peer, in stripes of at
// least kMinStripeBytes; smaller ones travel on one connection.
inline constexpr size_t kMinStripeBytes = size_t{512} << 10;
// Stripes are cut into DATA frames of at most this many bytes (bounds the work abort() must
// finish before it can put an ABORT frame on a busy connection).
inline constexpr size_t kMaxFramePayloadBytes = size_t{2} << 20;
// ABORT messages longer than this are truncated by the sender and refused by the receiver.
inline constexpr size_t kMaxAbortMessageBytes = 4096;

enum class FrameType : uint8_t {
  kData = 1,   // payload bytes [offset, offset + length) of message (channel, seq)
  kRts = 2,    // "message (channel, seq) of `total` bytes is waiting for your RTR"
  kRtr = 3,    // "my receive for (channel, seq) is posted: send the data"
  kAbort = 4,  // the sender failed with (status code, message); nothing follows
  kBye = 5,    // the sender closes gracefully; nothing follows
  kPing = 6,   // liveness notice (Transport::send_liveness); nothing follows
};

struct FrameHeader {
  FrameType type = FrameType::kData;
  uint32_t channel = 0;
  uint32_t status_code = 0;  // ABORT only
  uint64_t seq = 0;
  uint64_t offset = 0;
  uint64_t length = 0;  // bytes that follow the prefix (payload or abort message)
  uint64_t total = 0;   // the message's payload bytes (DATA, RTS)
};

// True for the frame types followed by an encoded WireHeader.
inline bool frame_has_wire_header(FrameType type) {
  return type == FrameType::kData || type == FrameType::kRts;
}

// Encodes the frame header, and the wire header when the type carries one, into `out`
// (at least kMaxFramePrefixBytes long). Returns the number of bytes written.
size_t encode_frame_prefix(const FrameHeader& frame, const WireHeader* wire, unsigned char* out);

// Decodes a frame header and checks what can be checked without knowing the receive it
// belongs to: magic, type, and that every length and offset is within the protocol's bounds.
// PROTOCOL error (naming `peer`) when the peer sent something this rank cannot trust.
Status decode_frame_header(const unsigned char in[kFrameHeaderBytes], int peer, FrameHeader* out);

// "DATA frame channel 3 seq 7 [0, 4096) of 8192" for error messages.
std::string describe_frame(const FrameHeader& frame);

}  // namespace tidegate::tcp
