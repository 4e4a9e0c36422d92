#include "api/transport_registry.h"

#include "transport_table.inc"  // generated: declarations and TIDEGATE_TRANSPORT_ROWS

namespace tidegate {

const std::vector<TransportEntry>& built_transports() {
  static const std::vector<TransportEntry> table = {TIDEGATE_TRANSPORT_ROWS};
  return table;
}

const TransportEntry* find_transport(const std::string& name) {
  for (const TransportEntry& entry : built_transports()) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

}  // namespace tidegate
