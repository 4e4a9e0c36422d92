// The plan: for each (collective, message-size range, memory kind) the ranked (transport,
// algorithm) choices, built from the cost model over the agreed probe profile, restricted by
// TIDEGATE_TUNE and TIDEGATE_ALGO. Built identically on every rank from identical inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "base/transport.h"
#include "base/types.h"
#include "collectives/algorithm_table.h"
#include "select/cost_model.h"
#include "select/probe_profile.h"
#include "select/tune.h"

namespace tidegate {

struct PlanChoice {
  std::string transport;
  int transport_index = 0;                  // into PlanInputs::transports (communicator order)
  const AlgorithmRow* algorithm = nullptr;  // a row of collectives/algorithm_table.h
  std::string algorithm_name() const { return algorithm != nullptr ? algorithm->name : ""; }
  // At the entry's representative size: its geometric middle, with an open-ended last range
  // taken as [min_bytes, 2 * min_bytes]. 0 when the model has no figures for the choice.
  double predicted_us = 0;
};

struct PlanEntry {
  OpKind kind = OpKind::kAllreduce;
  tidegate_memory_t memory = TIDEGATE_MEMORY_HOST;
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;   // inclusive
  std::vector<PlanChoice> ranked;  // best first; never empty
  bool tuned = false;              // restricted by TIDEGATE_TUNE or TIDEGATE_ALGO
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
  const Config* config = nullptr;  // TIDEGATE_ALGO forced algorithms, size-rule
                                   // thresholds (nullptr = the table's defaults)
  Corrections corrections;
  // When true (the probe is off), the top choice follows the fixed size rule
  // (select/size_rule.h) on the first transport that takes the memory kind, exactly at the
  // configured thresholds, instead of the cost model; the model (when its figures are valid)
  // still orders the fallbacks and fills predicted_us. TUNE and TIDEGATE_ALGO still apply.
  // A (collective, memory kind) whose transports the profile has no figures for is planned
  // this way too, whatever this flag says.
  bool use_size_rule = false;
};

// Predicted microseconds of `choice` for `kind` at `bytes`, as the plan prices it (with the
// identity check that a choice off the first transport or onto a native collective pays).
// Negative when the model cannot price it.
double plan_choice_cost(const PlanInputs& inputs, const PlanChoice& choice, OpKind kind,
                        int64_t bytes);
// The identity check's price: ceil(log2 P) latencies of the first transport (0 for one rank).
double identity_check_cost(const PlanInputs& inputs);
// The size at which the plan prices a range [lo, hi]: its geometric middle ([lo, 2 lo] when hi
// is unbounded).
int64_t representative_bytes(int64_t lo, int64_t hi);

// Candidates for (collective, memory): every transport taking that memory kind x every
// algorithm of the collective, plus "native" where the transport's capabilities offer it; the
// model ranks them (ties: transport order, then algorithm order) and each entry keeps the best
// few. Restrictions, per size:
//   - TIDEGATE_ALGO (collective=algorithm) keeps that algorithm for every size;
//   - the last TUNE rule covering the size wins over earlier ones; its @algorithm replaces
//     TIDEGATE_ALGO's, its transport narrows the transports.
// A rule that targets 'all' or leaves the memory kind open is skipped for the collectives and
// memory kinds where it matches no candidate (all:@ring does not break broadcast); it is an
// error only where it names both, or when it matches nowhere.
class Plan {
 public:
  // CONFIG error when a TUNE rule names a transport that is not available, or when a TUNE rule
  // or TIDEGATE_ALGO leaves some entry with no valid choice (naming the rule and the valid
  // names); INVALID_ARGUMENT for a size below 1 or no transports. *plan is untouched on error.
  static Status build(const PlanInputs& inputs, Plan* plan);

  // The entry covering (kind, memory, bytes); nullptr when the plan has none (e.g. cuda memory
  // with no transport that takes it).
  const PlanEntry* find(OpKind kind, tidegate_memory_t memory, int64_t bytes) const;

  const std::vector<PlanEntry>& entries() const { return entries_; }

  // Human table: collective, memory, size range, transport/algorithm, predicted time, runner-up.
  std::string to_table() const;
  // JSON array of entries: {"collective","memory":"host"|"cuda","min_bytes","max_bytes"
  // (inclusive; null = no upper bound),"transport","algorithm","predicted_us","tuned",
  // "ranked":[{"transport","algorithm","predicted_us"},...]}.
  std::string to_json() const;

 private:
  std::vector<PlanEntry> entries_;
};

}  // namespace tidegate
