// Connecting a communicator's transports: the one TIDEGATE_TRANSPORT names, or under "auto"
// every transport this build has that can run here (the probe and the plan then choose
// between them per collective and size).
#pragma once

#include <memory>
#include <vector>

#include "base/transport.h"

namespace tidegate {

// Creates the transports for `context` (context.store is the communicator-scoped store; each
// transport gets its own prefix under it). Under auto a transport that cannot start here (MPI
// not initialised, no GPU, ...) is left out, and the ranks then check that they all connected
// the same set, failing with an error naming the ranks that differ. A forced transport that
// cannot start is an error.
Status connect_transports(const TransportContext& context,
                          std::vector<std::unique_ptr<Transport>>* transports);

}  // namespace tidegate
