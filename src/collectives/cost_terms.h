// The figures every algorithm's cost formula reads (the alpha-beta-gamma model of Hockney and
// of Thakur, Rabenseifner & Gropp 2005), filled by select/cost_model.cc from the agreed probe,
// and the small formulas several algorithms share. All times in microseconds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tidegate {

struct CostTerms {
  double alpha = 0;   // per message
  double beta = 0;    // per byte on the wire (1 / bandwidth with every link busy)
  double gamma = -1;  // per byte reduced locally; < 0 when the reduce throughput is unknown
  // A transport's native collective, where measured: its latency and per-byte time (both 0
  // when unmeasured), and the largest size it was measured at (0 = unknown).
  double native_alpha = 0;
  double native_beta = 0;
  double native_max_bytes = 0;
  // The cheapest of tidegate's own algorithms of the same collective on the same transport
  // (< 0 when none can be priced): what an unmeasured native collective is assumed to be.
  double own_best = -1;
  // Compressed algorithms: the codec's payload bytes per dense byte (top-k 1%: about 0.018),
  // and its encode and decode(-add) time per dense byte.
  double payload_ratio = 1;
  double encode = 0;
  double decode = 0;
};

namespace cost {

// Largest power of two <= p (p >= 1).
inline int64_t floor_pow2(int64_t p) {
  int64_t q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

// Rounds of a binomial tree / dissemination over p ranks: ceil(log2 p).
inline double ceil_log2(int64_t p) {
  double rounds = 0;
  for (int64_t reach = 1; reach < p; reach *= 2) rounds += 1;
  return rounds;
}

// Ring reduce-scatter: P-1 neighbour steps of n/P bytes. Our ring is segmented, so the
// reduction of one segment overlaps the transfer of the next: a step costs the slower of the
// wire and the reduction rather than their sum.
inline double ring_reduce_scatter(const CostTerms& t, double n, int64_t p) {
  if (t.gamma < 0) return -1;
  const double frac = static_cast<double>(p - 1) / static_cast<double>(p);
  return static_cast<double>(p - 1) * t.alpha + frac * n * std::max(t.beta, t.gamma);
}

// Ring allgather: P-1 neighbour steps of n/P bytes, nothing to reduce.
inline double ring_allgather(const CostTerms& t, double n, int64_t p) {
  const double frac = static_cast<double>(p - 1) / static_cast<double>(p);
  return static_cast<double>(p - 1) * t.alpha + frac * n * t.beta;
}

// A transport's native collective moving `byte_factor` * n bytes per rank (2(P-1)/P for an
// allreduce, (P-1)/P for its halves). Measured figures are fitted like alpha/beta; beyond the
// largest size they were measured at, a vendor collective may switch to another algorithm
// (Open MPI's tuned allreduce did, running 1.7x slower than its small-size fit at 16 MiB on
// the emulated 1 Gbit cluster), so there it is trusted no further than our own best.
// Unmeasured, it is assumed no better than our own best, plus one latency for the cross-rank
// header check that precedes every native call, so it never wins on faith.
inline double native_collective(const CostTerms& t, double n, double byte_factor) {
  if (t.native_alpha > 0 && t.native_beta > 0) {
    double fitted = t.native_alpha + n * t.native_beta * byte_factor;
    if (t.native_max_bytes > 0 && n > t.native_max_bytes && t.own_best >= 0) {
      fitted = std::max(fitted, t.own_best + t.alpha);
    }
    return fitted;
  }
  return t.own_best < 0 ? -1 : t.own_best + t.alpha;
}

// (P-1)/P.
inline double spread(int64_t p) { return static_cast<double>(p - 1) / static_cast<double>(p); }

}  // namespace cost
}  // namespace tidegate
