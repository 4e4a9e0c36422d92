// The table of transports this build has. Core code reaches optional transports only through
// this table, so no core file needs an #ifdef for MPI, UCX or NCCL.
#pragma once

#include <string>
#include <vector>

#include "base/transport.h"

namespace tidegate {

struct TransportEntry {
  const char* name;
  TransportFactory create;
};

// Built transports in preference order (the generated list, see CMakeLists.txt).
const std::vector<TransportEntry>& built_transports();

// Finds a built transport by name; nullptr when this build lacks it.
const TransportEntry* find_transport(const std::string& name);

}  // namespace tidegate
