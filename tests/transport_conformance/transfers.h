// The messages the contract bodies exchange, and the waits that drive a transport until they
// finish. Every wait has a deadline (kWaitMs unless told otherwise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/transport.h"
#include "message_buffer.h"
#include "world.h"

namespace tidegate::conformance {

using Handle = Transport::Handle;

// The header of a conformance message from `sender`: an internal op whose count is its byte
// length, `chunk` numbering the message within its channel.
WireHeader message_header(const Rank& rank, int sender, uint64_t op_seq, uint32_t chunk,
                          size_t bytes);

// Deterministic content of message `seq` from `sender` to `receiver`.
std::vector<unsigned char> pattern(int sender, int receiver, uint64_t seq, size_t bytes);

// Posts a send / receive of the whole buffer; a refused post fails the case and returns 0
// (which later waits report as an unknown handle).
Handle post_send(Rank& rank, int peer, uint32_t channel, const WireHeader& header,
                 MessageBuffer& payload);
Handle post_send_bytes(Rank& rank, int peer, uint32_t channel, const WireHeader& header,
                       MessageBuffer& payload, size_t bytes);
Handle post_recv(Rank& rank, int peer, uint32_t channel, const WireHeader& expected,
                 MessageBuffer& payload);

// How one transfer ended, as test() reported it.
struct Finished {
  bool done = false;
  Status status = timeout_error("the transfer was still pending at the test's deadline");
  size_t bytes = 0;  // the payload length test() reported
};

// Drives `transport` until every handle has finished or `deadline`; handles still pending
// then stay with the transport (reported not done, TIMEOUT).
std::vector<Finished> wait_all(Transport& transport, const std::vector<Handle>& handles,
                               Deadline deadline = Deadline::after_ms(kWaitMs));
Finished wait_one(Transport& transport, Handle handle,
                  Deadline deadline = Deadline::after_ms(kWaitMs));

// Drives `transport` until progress() reports that it failed: that error, or TIMEOUT.
Status wait_for_failure(Transport& transport, Deadline deadline = Deadline::after_ms(kWaitMs));

// Every transfer that did not finish OK, one per line ("" when all did).
std::string failures(const std::vector<Finished>& finished);

// Expects a clean close (nothing pending, every peer closing at the same time).
void expect_clean_close(Rank& rank);

// Whether the status's message contains `text`.
bool contains(const Status& status, const std::string& text);

}  // namespace tidegate::conformance
