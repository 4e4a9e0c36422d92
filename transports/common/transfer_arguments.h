// The checks every transport's isend and irecv make of their arguments, worded alike.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "base/wire_header.h"

namespace tidegate {

// isend: the header announces exactly `bytes`, and a non-empty payload has a buffer.
Status check_send_arguments(const WireHeader& header, const void* payload, size_t bytes);
// irecv: the expected payload fits the `bytes` of capacity, and a non-empty one has a buffer.
Status check_recv_arguments(const WireHeader& expected, const void* payload, size_t bytes);

}  // namespace tidegate
