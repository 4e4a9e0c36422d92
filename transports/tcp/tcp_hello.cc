#include "transports/tcp/tcp_hello.h"

#include <string>

namespace tidegate::tcp {

namespace {
constexpr uint32_t kHelloMagic = 0x31484754;  // "TGH1"
}  // namespace

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]) {
  const uint64_t words[] = {kHelloMagic, h.rank, h.size, h.stream, h.streams};
  unsigned char* p = out;
  for (uint64_t w : words)
    for (int i = 0; i < 4; ++i) *p++ = static_cast<unsigned char>(w >> (8 * i));
  for (int i = 0; i < 8; ++i) *p++ = static_cast<unsigned char>(h.comm_id >> (8 * i));
  for (int i = 0; i < 4; ++i) *p++ = static_cast<unsigned char>(h.verdict >> (8 * i));
}

bool decode_hello(const unsigned char in[kHelloBytes], Hello* h) {
  auto get = [&in](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    return v;
  };
  if (get(0, 4) != kHelloMagic) return false;
  h->rank = static_cast<uint32_t>(get(4, 4));
  h->size = static_cast<uint32_t>(get(8, 4));
  h->stream = static_cast<uint32_t>(get(12, 4));
  h->streams = static_cast<uint32_t>(get(16, 4));
  h->comm_id = get(20, 8);
  h->verdict = static_cast<uint32_t>(get(28, 4));
  return true;
}

const char* verdict_text(uint32_t verdict) {
  switch (verdict) {
    case kAccepted:
      return "accepted";
    case kWrongCommunicator:
      return "it belongs to another communicator";
    case kWrongWorldSize:
      return "its world size differs";
    case kWrongStreamCount:
      return "its TIDEGATE_TCP_STREAMS differs";
    case kUnexpectedRank:
      return "no such rank is expected to connect here";
    case kDuplicate:
      return "that rank's connection is already established";
  }
  return "unknown verdict";
}

Status refusal_status(uint32_t verdict, int peer, const Hello& sent) {
  const std::string them = "rank " + std::to_string(peer);
  switch (verdict) {
    case kWrongCommunicator:
      return protocol_error(them +
                            " refused our data connection: it belongs to another "
                            "communicator (stale address in the store?)");
    case kWrongWorldSize:
      return config_error(them +
                          " refused our data connection: it has a different world size "
                          "than our " +
                          std::to_string(sent.size));
    case kWrongStreamCount:
      return config_error(them +
                          " refused our data connection: its TIDEGATE_TCP_STREAMS "
                          "differs from ours (" +
                          std::to_string(sent.streams) + "); set the same value on every rank");
    default:
      return protocol_error(them + " refused our data connection: " + verdict_text(verdict));
  }
}

}  // namespace tidegate::tcp
