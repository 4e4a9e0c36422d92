// The alpha-beta-gamma cost model (Hockney; Thakur, Rabenseifner & Gropp 2005): predicted time
// of each (transport, algorithm) for a collective of n bytes on P ranks. The formulas live with
// the algorithms (each row of collectives/algorithm_table.h has one); this file turns the
// agreed probe figures of a transport into their terms: alpha = latency per message, beta =
// seconds per byte on a link (1/bandwidth), gamma = seconds per byte reduced locally.
// Corrections (measured / predicted, learned online by the planner) scale a (transport,
// algorithm) pair's prediction.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "base/types.h"
#include "collectives/algorithm_table.h"
#include "select/probe_profile.h"

namespace tidegate {

// (transport, algorithm) -> multiplicative correction of the prediction (1 = trust the model).
using Corrections = std::map<std::pair<std::string, std::string>, double>;

struct CostQuery {
  OpKind kind = OpKind::kAllreduce;
  int64_t bytes = 0;  // the collective's size as the plan keys it (allreduce: the tensor;
                      // allgather/reduce_scatter: the full, size*count, buffer)
  int size = 1;
};

// The terms of `link`'s figures (alpha, beta, gamma, native figures, and our own best
// algorithm for query.kind). false when the figures cannot be trusted (negative, NaN).
bool cost_terms(const ProbeProfile& profile, const TransportFigures& link, const CostQuery& query,
                CostTerms* terms);

// Predicted microseconds of `algorithm` on `transport` (with figures `link`), or a negative
// value when the model has no figures for that pair (then it is not a candidate).
double predicted_us(const ProbeProfile& profile, const TransportFigures& link,
                    const AlgorithmRow& algorithm, const CostQuery& query,
                    const Corrections& corrections);

}  // namespace tidegate
