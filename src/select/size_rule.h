// The interim algorithm choice: a fixed rule on the message size and the thresholds of the
// configuration table. The bandwidth-probe issue replaces it with a cost model fed by
// measurements; it is kept in its own file so that the swap touches nothing else.
#pragma once

#include "collectives/collective_args.h"
#include "core/config.h"

namespace tidegate {

// Algorithm name (as in TIDEGATE_ALGO) the rule picks for `args`:
//   allreduce: bytes <= TIDEGATE_ALLREDUCE_RD_MAX_BYTES   -> "recursive_doubling"
//              bytes <  TIDEGATE_ALLREDUCE_RING_MIN_BYTES -> "rabenseifner"
//              otherwise                                 -> "ring"
//   reduce_scatter, allgather, allgatherv -> "ring"; broadcast -> "binomial";
//   barrier -> "dissemination"; alltoallv -> "pairwise".
// Static string; thread-safe.
const char* size_rule_algorithm(const Config& config, const CollectiveArgs& args);

}  // namespace tidegate
