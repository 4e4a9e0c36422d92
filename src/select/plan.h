// The plan: for each (collective, message-size range, memory kind) the ranked (transport,
// algorithm) choices, built from the cost model over the agreed probe profile, restricted by
// TIDEGATE_TUNE and TIDEGATE_ALGO. Built identically on every rank from identical inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "core/transport.h"
#include "core/types.h"
#include "select/cost_model.h"
#include "select/probe_profile.h"
#include "select/tune.h"

namespace tidegate {

struct PlanChoice {
  std::string transport;
  std::string algorithm;
  double predicted_us = 0;  // at the entry's representative size
};

struct PlanEntry {
  OpKind kind = OpKind::kAllreduce;
  tidegate_memory_t memory = TIDEGATE_MEMORY_HOST;
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;     // inclusive
  std::vector<PlanChoice> ranked;    // best first; never empty
  bool tuned = false;                // restricted by TIDEGATE_TUNE or TIDEGATE_ALGO
};

// A transport the plan may use: its name and what it can do.
struct TransportOffer {
  std::string name;
  TransportCapabilities capabilities;
};

struct PlanInputs {
  int size = 1;
  ProbeProfile profile;
  std::vector<TransportOffer> transports;  // in communicator order
  std::vector<TuneRule> tune;
  const Config* config = nullptr;          // TIDEGATE_ALGO forced algorithms
  Corrections corrections;
};

class Plan {
 public:
  // CONFIG error when a TUNE rule or TIDEGATE_ALGO leaves some entry with no valid choice
  // (naming the rule and the valid names).
  static Status build(const PlanInputs& inputs, Plan* plan);

  // The entry covering (kind, memory, bytes); nullptr when the plan has none (e.g. cuda memory
  // with no transport that takes it).
  const PlanEntry* find(OpKind kind, tidegate_memory_t memory, int64_t bytes) const;

  const std::vector<PlanEntry>& entries() const { return entries_; }

  // Human table: collective, memory, size range, transport/algorithm, predicted time, runner-up.
  std::string to_table() const;
  // JSON array of entries.
  std::string to_json() const;

 private:
  std::vector<PlanEntry> entries_;
};

}  // namespace tidegate
