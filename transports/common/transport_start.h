// Starting an optional transport together: every rank says whether it can start it here, and
// all go on or all refuse with the same reason. Without this, a rank that cannot (no GPU, MPI
// not initialised) would leave the others waiting for it until the creation deadline.
#pragma once

#include <string>
#include <vector>

#include "base/transport.h"

namespace tidegate {

// Publishes this rank's answer under context.store ("" obstacle = it can start, with `detail`,
// e.g. its host and device) and reads every rank's. UNSUPPORTED "the <transport> transport is
// unavailable: rank R: <obstacle>" naming the first rank that cannot; otherwise fills *details
// (may be null) with every rank's detail, in rank order.
Status agree_on_start(const TransportContext& context, const std::string& transport,
                      const std::string& obstacle, const std::string& detail,
                      std::vector<std::string>* details);

}  // namespace tidegate
