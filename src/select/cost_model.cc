#include "select/cost_model.h"

#include <cmath>

namespace tidegate {

namespace {

// With one rank every collective is a local copy (or nothing): a small constant keeps the
// ranking well defined without pretending the transport matters.
constexpr double kSingleRankUs = 0.1;

// The cheapest of our own (non-native) algorithms for `kind`, or -1.
double best_own_us(const CostTerms& terms, OpKind kind, double n, int64_t p) {
  double best = -1;
  for (const AlgorithmRow* row : algorithms_for(kind)) {
    // Dense rows only: a compressed row's price depends on a codec the op may not have.
    if (row->native() || row->compressed()) continue;
    const double us = row->cost(terms, n, p);
    if (us >= 0 && (best < 0 || us < best)) best = us;
  }
  return best;
}

}  // namespace

bool cost_terms(const ProbeProfile& profile, const TransportFigures& link, const CostQuery& query,
                CostTerms* terms) {
  // `!(x > 0)` also rejects NaN: figures we cannot trust make the pair no candidate.
  if (!(link.alpha_us >= 0) || !(link.bandwidth_GBps > 0)) return false;
  CostTerms t;
  t.alpha = link.alpha_us;
  t.beta = 1.0 / (link.bandwidth_GBps * 1e3);  // GB/s = 1e3 bytes per microsecond
  t.gamma = profile.reduce_GBps > 0 ? 1.0 / (profile.reduce_GBps * 1e3) : -1;
  if (link.native_alpha_us > 0 && link.native_bandwidth_GBps > 0) {
    t.native_alpha = link.native_alpha_us;
    t.native_beta = 1.0 / (link.native_bandwidth_GBps * 1e3);
    t.native_max_bytes = static_cast<double>(link.native_max_bytes);
  }
  t.own_best = best_own_us(t, query.kind, static_cast<double>(query.bytes), query.size);
  *terms = t;
  return true;
}

double predicted_us(const ProbeProfile& profile, const TransportFigures& link,
                    const AlgorithmRow& algorithm, const CostQuery& query,
                    const Corrections& corrections) {
  if (query.size < 1 || query.bytes < 0 || algorithm.cost == nullptr) return -1;
  CostTerms terms;
  if (!cost_terms(profile, link, query, &terms)) return -1;
  double us = algorithm.cost(terms, static_cast<double>(query.bytes), query.size);
  if (us < 0 || !std::isfinite(us)) return -1;
  if (query.size == 1) us = kSingleRankUs;

  auto it = corrections.find({link.transport, algorithm.name});
  if (it != corrections.end() && it->second > 0 && std::isfinite(it->second)) us *= it->second;
  return us;
}

}  // namespace tidegate
