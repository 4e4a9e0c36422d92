#include "select/cost_model.h"

#include <algorithm>
#include <cmath>

namespace tidegate {

namespace {

// With one rank every collective is a local copy (or nothing): a small constant keeps the
// ranking well defined without pretending the transport matters.
constexpr double kSingleRankUs = 0.1;

// The model's per-message and per-byte figures, in microseconds. beta/gamma are 0-free by
// construction: figures that would make them infinite or negative are rejected earlier.
struct Terms {
  double alpha = 0;  // us per message
  double beta = 0;   // us per byte on the wire
  double gamma = 0;  // us per byte reduced; < 0 when the reduce throughput is unknown
};

// Largest power of two <= p (p >= 1).
int64_t floor_pow2(int64_t p) {
  int64_t q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

// Rounds of a binomial tree / dissemination over p ranks: ceil(log2 p).
double ceil_log2(int64_t p) {
  double rounds = 0;
  for (int64_t reach = 1; reach < p; reach *= 2) rounds += 1;
  return rounds;
}

bool is_reducing(OpKind kind) {
  return kind == OpKind::kAllreduce || kind == OpKind::kReduceScatter;
}

// Recursive doubling: each of log2(p') rounds exchanges and reduces the whole vector. A
// non-power-of-two P first folds the P - p' extra ranks into partners (one whole-vector send
// plus a reduce) and finally sends them the result (one more whole-vector send).
double recursive_doubling_us(const Terms& t, double n, int64_t p) {
  int64_t core = floor_pow2(p);
  double t_us = std::log2(static_cast<double>(core)) * (t.alpha + n * t.beta + n * t.gamma);
  if (core != p) t_us += (t.alpha + n * t.beta + n * t.gamma) + (t.alpha + n * t.beta);
  return t_us;
}

// Rabenseifner: recursive halving reduce-scatter then recursive doubling allgather, each
// log2(p') messages moving (p'-1)/p' of the vector; the reduction works on whole received
// halves, so it does not overlap the transfer. Same fold as recursive doubling otherwise.
double rabenseifner_us(const Terms& t, double n, int64_t p) {
  int64_t core = floor_pow2(p);
  double frac = static_cast<double>(core - 1) / static_cast<double>(core);
  double t_us = 2 * std::log2(static_cast<double>(core)) * t.alpha + 2 * frac * n * t.beta +
                frac * n * t.gamma;
  if (core != p) t_us += (t.alpha + n * t.beta + n * t.gamma) + (t.alpha + n * t.beta);
  return t_us;
}

// Ring reduce-scatter: P-1 neighbour steps of n/P bytes. Our ring is segmented, so the
// reduction of one segment overlaps the transfer of the next: a step costs the slower of the
// wire and the reduction rather than their sum (this is why the ring wins for large vectors
// although Rabenseifner moves the same bytes in fewer messages).
double ring_reduce_scatter_us(const Terms& t, double n, int64_t p) {
  double frac = static_cast<double>(p - 1) / static_cast<double>(p);
  return static_cast<double>(p - 1) * t.alpha + frac * n * std::max(t.beta, t.gamma);
}

// Ring allgather: P-1 neighbour steps of n/P bytes, nothing to reduce.
double ring_allgather_us(const Terms& t, double n, int64_t p) {
  double frac = static_cast<double>(p - 1) / static_cast<double>(p);
  return static_cast<double>(p - 1) * t.alpha + frac * n * t.beta;
}

// Our own algorithms' formulas; negative when (kind, algorithm) has none.
double own_algorithm_us(const Terms& t, OpKind kind, const std::string& algorithm, double n,
                        int64_t p) {
  if (is_reducing(kind) && t.gamma < 0) return -1;  // reduce throughput unknown
  switch (kind) {
    case OpKind::kAllreduce:
      if (algorithm == "ring") return ring_reduce_scatter_us(t, n, p) + ring_allgather_us(t, n, p);
      if (algorithm == "recursive_doubling") return recursive_doubling_us(t, n, p);
      if (algorithm == "rabenseifner") return rabenseifner_us(t, n, p);
      return -1;
    case OpKind::kReduceScatter:
      return algorithm == "ring" ? ring_reduce_scatter_us(t, n, p) : -1;
    case OpKind::kAllgather:
    case OpKind::kAllgatherv:  // uneven blocks are not modelled: the mean block stands for all
      return algorithm == "ring" ? ring_allgather_us(t, n, p) : -1;
    case OpKind::kBroadcast:
      // Binomial tree: ceil(log2 P) rounds, each forwarding the whole vector.
      return algorithm == "binomial" ? ceil_log2(p) * (t.alpha + n * t.beta) : -1;
    case OpKind::kBarrier:
      // Dissemination: ceil(log2 P) rounds of empty messages.
      return algorithm == "dissemination" ? ceil_log2(p) * t.alpha : -1;
    case OpKind::kAlltoallv:
      // Pairwise: P-1 rounds, each sending this rank's n/P block for one peer.
      return algorithm == "pairwise" ? ring_allgather_us(t, n, p) : -1;
    case OpKind::kInternal:
      break;
  }
  return -1;
}

// The cheapest of our own algorithms for `kind` (used to estimate an unmeasured native one).
double best_own_us(const Terms& t, OpKind kind, double n, int64_t p) {
  double best = -1;
  for (const char* name : {"ring", "recursive_doubling", "rabenseifner"}) {
    double us = own_algorithm_us(t, kind, name, n, p);
    if (us >= 0 && (best < 0 || us < best)) best = us;
  }
  return best;
}

// A transport's native collective. Measured figures are fitted like alpha/beta with the
// bandwidth-optimal byte factors (2(P-1)/P for allreduce, (P-1)/P for the halves). Unmeasured,
// we assume the vendor is no better than our best algorithm and charge one more latency for
// the cross-rank header check that precedes every native call, so it never wins on faith.
double native_us(const TransportFigures& link, const Terms& t, OpKind kind, double n, int64_t p) {
  if (kind != OpKind::kAllreduce && kind != OpKind::kAllgather &&
      kind != OpKind::kReduceScatter) {
    return -1;
  }
  double frac = static_cast<double>(p - 1) / static_cast<double>(p);
  double own = best_own_us(t, kind, n, p);
  if (link.native_alpha_us > 0 && link.native_bandwidth_GBps > 0) {
    double native_beta = 1.0 / (link.native_bandwidth_GBps * 1e3);
    double factor = kind == OpKind::kAllreduce ? 2 * frac : frac;
    double fitted = link.native_alpha_us + n * native_beta * factor;
    // Beyond the sizes it was measured at, a vendor collective may switch to another algorithm
    // (Open MPI's tuned allreduce does, and ran 1.7x slower than its small-size fit at 16 MiB
    // on the emulated 1 Gbit cluster): there it is trusted no further than our own best.
    if (link.native_max_bytes > 0 && n > link.native_max_bytes && own >= 0) {
      fitted = std::max(fitted, own + t.alpha);
    }
    return fitted;
  }
  return own < 0 ? -1 : own + t.alpha;
}

}  // namespace

double predicted_us(const ProbeProfile& profile, const TransportFigures& link,
                    const std::string& algorithm, const CostQuery& query,
                    const Corrections& corrections) {
  // `!(x > 0)` also rejects NaN: figures we cannot trust make the pair no candidate.
  if (query.size < 1 || query.bytes < 0 || query.kind == OpKind::kInternal) return -1;
  if (!(link.alpha_us >= 0) || !(link.bandwidth_GBps > 0)) return -1;

  Terms t;
  t.alpha = link.alpha_us;
  t.beta = 1.0 / (link.bandwidth_GBps * 1e3);  // GB/s = 1e3 bytes per microsecond
  t.gamma = profile.reduce_GBps > 0 ? 1.0 / (profile.reduce_GBps * 1e3) : -1;

  const double n = static_cast<double>(query.bytes);
  const int64_t p = query.size;
  double us = 0;
  if (algorithm == "native") {
    us = native_us(link, t, query.kind, n, p);
  } else {
    us = own_algorithm_us(t, query.kind, algorithm, n, p);
  }
  if (us < 0 || !std::isfinite(us)) return -1;
  if (p == 1) us = kSingleRankUs;

  auto it = corrections.find({link.transport, algorithm});
  if (it != corrections.end() && it->second > 0 && std::isfinite(it->second)) us *= it->second;
  return us;
}

}  // namespace tidegate
