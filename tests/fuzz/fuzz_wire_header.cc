// libFuzzer target: decoding and checking the header that precedes every collective message
// (base/wire_header.h) - the check a receiver runs before it trusts a payload byte. Input: two
// encoded 64-byte headers, the one this rank expects and the one that arrived. Seeds:
// corpus/wire_header/. Checks, beyond ASan/UBSan: decoding is total and re-encodes to the same
// bytes (padding aside); the check never accepts a header whose identity fields differ from the
// expected one, or a payload over the expected length or bound; every refusal has a message
// that names the receiving rank; describe_op works on any header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/wire_header.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tidegate;
  if (size < 2 * kWireHeaderBytes) return 0;
  const WireHeader expected = decode_wire_header(data);
  const WireHeader received = decode_wire_header(data + kWireHeaderBytes);
  unsigned char again[kWireHeaderBytes];
  encode_wire_header(received, again);
  check(decode_wire_header(again).count == received.count);
  unsigned char twice[kWireHeaderBytes];
  encode_wire_header(decode_wire_header(again), twice);
  check(std::memcmp(again, twice, kWireHeaderBytes) == 0);
  check(!describe_op(expected).empty() && !describe_op(received).empty());
  const int peer = static_cast<int>(received.sender_rank & 0xffff);
  const Status st = check_wire_header(expected, received, 7, peer);
  if (st.is_ok()) {
    check(received.magic == kWireMagic && received.version == kWireVersion);
    check(received.comm_id == expected.comm_id && received.op_seq == expected.op_seq &&
          received.op_kind == expected.op_kind && received.dtype == expected.dtype &&
          received.reduce_op == expected.reduce_op && received.count == expected.count &&
          received.codec_id == expected.codec_id && received.aux == expected.aux &&
          received.chunk == expected.chunk && received.key_hash == expected.key_hash &&
          received.codec_config_hash == expected.codec_config_hash);
    check(expected.bounded_payload() ? received.payload_bytes <= expected.payload_bytes
                                     : received.payload_bytes == expected.payload_bytes);
  } else {
    check(st.message().find("rank 7") != std::string::npos);
  }
  // The same header checked against itself (with its sender) always passes, when well-formed.
  WireHeader self = received;
  self.magic = kWireMagic;
  self.version = kWireVersion;
  self.sender_rank = 3;
  check(check_wire_header(self, self, 0, 3).is_ok());
  return 0;
}
