// The fixed choice of an algorithm: TIDEGATE_ALGO's forced algorithm, else a rule on the
// message size and the thresholds of the configuration table. The plan reproduces this rule
// when the probe is off (TIDEGATE_PROBE=off), and an engine without a planner (tests that
// drive one transport) runs it directly.
#pragma once

#include <memory>

#include "base/config.h"
#include "collectives/algorithm_table.h"
#include "collectives/collective_args.h"

namespace tidegate {

// The row the size rule picks for `args`:
//   allreduce: bytes <= TIDEGATE_ALLREDUCE_RD_MAX_BYTES   -> recursive_doubling
//              bytes <  TIDEGATE_ALLREDUCE_RING_MIN_BYTES -> rabenseifner
//              otherwise                                 -> ring
//   reduce_scatter, allgather, allgatherv -> ring; broadcast -> binomial;
//   barrier -> dissemination; alltoallv -> pairwise.
// nullptr for a kind with no algorithm (kInternal). Thread-safe.
const AlgorithmRow* size_rule_algorithm(const Config& config, const CollectiveArgs& args);

// TIDEGATE_ALGO's algorithm for args.kind when it forces one, else the size rule's; for a
// compressed allreduce, compressed_algorithm(). CONFIG error naming the valid algorithms when
// the forced name is not one of args.kind's.
Status fixed_algorithm(const Config& config, const CollectiveArgs& args, const AlgorithmRow** row);

// The task of fixed_algorithm() for `args` on context.transport.
Status make_collective_task(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task);

}  // namespace tidegate
