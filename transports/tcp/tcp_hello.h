// The hello of a TCP data connection: after the job-secret handshake, the connecting rank says
// who it is (rank, stream index, communicator, world size, stream count) and the accepting rank
// answers with the same fields, its own rank and a verdict, so that a connection from another
// job, another communicator or a rank configured differently is refused with a reason on both
// ends. Fixed size (kHelloBytes), little-endian.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace tidegate::tcp {

inline constexpr size_t kHelloBytes = 32;
// The job-secret handshake's role label for data connections (bootstrap/auth.h).
inline constexpr const char* kAuthRole = "tcp";

// The acceptor's answer to a hello.
enum Verdict : uint32_t {
  kAccepted = 0,
  kWrongCommunicator = 1,
  kWrongWorldSize = 2,
  kWrongStreamCount = 3,
  kUnexpectedRank = 4,
  kDuplicate = 5,
};

// Sent by the connecting side; echoed (with the acceptor's own rank and a verdict) back.
struct Hello {
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t stream = 0;
  uint32_t streams = 0;
  uint64_t comm_id = 0;
  uint32_t verdict = kAccepted;
};

void encode_hello(const Hello& hello, unsigned char out[kHelloBytes]);
// False when the bytes do not start with the hello magic.
bool decode_hello(const unsigned char in[kHelloBytes], Hello* hello);
const char* verdict_text(uint32_t verdict);

// Why the acceptor refused a hello, as the connecting rank reports it.
Status refusal_status(uint32_t verdict, int peer, const Hello& sent);

}  // namespace tidegate::tcp
