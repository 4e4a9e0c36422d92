// Worlds of real transports (tcp, ucx) for the collective tests: `size` ranks as threads of
// this process, each with its own transport created through the transport registry, meeting
// through an in-memory store. Connecting costs far more than a small collective, so a test
// binary keeps one world per (transport, size) for all of its cases; a run that failed drops
// its world (its message streams may no longer pair) and the next use connects a new one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/transport.h"

namespace tidegate::testing {

// The transports of a connected world of `size` ranks over `transport`, in rank order.
// UNSUPPORTED when this build lacks the transport or it cannot run here (UCX without a usable
// device); any other error when it should have connected and did not.
Status shared_transports(const std::string& transport, int size, std::vector<Transport*>* out);

// Forgets (and destroys) that world: after a failed run, before its transports are reused.
void drop_shared_transports(const std::string& transport, int size);

}  // namespace tidegate::testing
