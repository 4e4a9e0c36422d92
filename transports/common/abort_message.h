// The abort message that message-based transports (MPI, UCX) send to every peer when this rank
// fails: a 32-bit status code followed by the failure's text, at most kAbortMessageBytes in
// all. Receivers fail with the same code and a message naming the aborting rank. (The TCP
// transport carries the same information in its ABORT frame.)
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace tidegate {

inline constexpr size_t kAbortMessageBytes = 1024;

// code (host byte order: every rank runs the same build) + the message, truncated to fit.
std::string encode_abort_message(const Status& status);

// The Status a rank fails with when `sender`'s abort message of `length` bytes arrives. An
// unknown or missing code becomes ABORTED, so a damaged message cannot pose as success.
Status decode_abort_message(const char* data, size_t length, int sender);

}  // namespace tidegate
