// The header that precedes every collective message on every transport (DESIGN.md: "every
// message has a header"). The receiver knows what it expects (its own op, count, dtype, ...)
// and compares field by field before it trusts a payload byte, so that ranks that posted
// different collectives fail at the first message with an error naming both ranks, the op
// and the field, instead of hanging or summing garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

inline constexpr uint32_t kWireMagic = 0x31574754;  // "TGW1" little-endian
inline constexpr uint16_t kWireVersion = 2;         // 2: key_hash, error-feedback flag
inline constexpr size_t kWireHeaderBytes = 64;

// WireHeader::flags bits.
// The payload's length varies (a sparse or compressed payload): in a sent header
// payload_bytes is the message's actual length; in the header a receiver expects it is the
// bound, the most the receive takes. A message longer than the bound is refused before any
// payload byte is stored.
inline constexpr uint16_t kWireFlagBoundedPayload = 1u << 0;
// A compressed op with error feedback on (part of the op's identity: ranks must agree).
inline constexpr uint16_t kWireFlagErrorFeedback = 1u << 1;

struct WireHeader {
  uint32_t magic = kWireMagic;
  uint16_t version = kWireVersion;
  OpKind op_kind = OpKind::kInternal;
  uint8_t dtype = 0;      // tidegate_dtype_t
  uint8_t reduce_op = 0;  // tidegate_reduce_op_t (0 where the collective has none)
  uint8_t codec_id = 0;   // 0 = dense, no codec
  uint16_t flags = 0;
  uint64_t comm_id = 0;  // agreed at communicator creation; separates communicators
  uint64_t op_seq = 0;   // posting order of the collective on its communicator
  int64_t count = 0;     // element count that defines the op (see each collective's docs)
  uint32_t chunk = 0;    // step / chunk index inside the op
  int32_t aux = 0;       // collective-specific (root of a broadcast, ...)
  uint32_t codec_config_hash = 0;
  uint64_t payload_bytes = 0;  // exact length, or the bound (kWireFlagBoundedPayload)
  uint32_t sender_rank = 0;
  uint32_t key_hash = 0;  // compressed ops: hash of (tensor key, the key's step); else 0

  bool bounded_payload() const { return (flags & kWireFlagBoundedPayload) != 0; }
};

// Little-endian, fixed 64-byte encoding (padding zeroed).
void encode_wire_header(const WireHeader& header, unsigned char out[kWireHeaderBytes]);
// Decodes without judging the content; check_wire_header() judges.
WireHeader decode_wire_header(const unsigned char in[kWireHeaderBytes]);

// Compares a received header with the one this rank expects from `peer`. On the first
// differing field returns an error (PROTOCOL for magic/version/communicator, MISMATCH for
// the collective's own fields) that names this rank, the peer, the op and the field, e.g.
//   "allreduce op #7: rank 1 posted count=1024 but rank 2 posted count=1023 (field 'count')"
// The payload length must equal the expected one, or, when the expected header is bounded
// (kWireFlagBoundedPayload), not exceed it: a longer one is a PROTOCOL error naming both
// lengths (the peer broke the bound its own codec promises).
Status check_wire_header(const WireHeader& expected, const WireHeader& received, int my_rank,
                         int peer);

// "allreduce op #7 (float32 sum, count 1024)" for messages.
std::string describe_op(const WireHeader& header);

}  // namespace tidegate
