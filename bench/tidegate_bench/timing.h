// How tidegate-bench measures a collective: every iteration starts after a barrier (so ranks
// begin together and one iteration's stragglers do not leak into the next) and is timed on
// every rank; the reported time is the median over iterations of the slowest rank's time.
// Median, because on a shared machine a few iterations hit scheduling noise; slowest rank,
// because a collective is done only when its last rank is. The MPI baseline is measured the
// same way (with MPI_Barrier), so the two columns compare like with like.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

struct TimedLoop {
  std::function<Status()> barrier;    // run before every iteration, not timed
  std::function<void()> prepare;      // run before every iteration, not timed (may be empty)
  std::function<Status()> operation;  // the timed collective
};

// Runs `warmup` untimed iterations, then `iters` timed ones; returns this rank's seconds for
// each timed iteration.
Status run_timed(const TimedLoop& loop, int warmup, int iters, std::vector<double>* seconds);

// The same for several loops in turns: iteration i of every loop (each after its own barrier)
// before iteration i + 1 of any, warm-up included; (*seconds)[k] holds loop k's timed
// iterations. A slow phase of a shared machine (other processes, a rank descheduled for a
// while) then falls on every loop alike instead of on whichever loop ran during it, which
// matters when the loops are compared with each other: on the emulated 4-rank cluster two
// rows of the same 4 KiB allreduce, timed one after the other, differed by up to 2x.
Status run_timed_interleaved(const std::vector<const TimedLoop*>& loops, int warmup, int iters,
                             std::vector<std::vector<double>>* seconds);

// Every rank passes its per-iteration times; every rank gets the median over iterations of
// the per-iteration maximum across ranks (one tidegate allreduce of the vector).
Status slowest_rank_median(tidegate_comm_t comm, std::vector<double> seconds, double* median);

// A Status for a failed tidegate call, with the library's message and what we were doing.
Status from_tidegate(tidegate_status_t code, const char* what);

}  // namespace tidegate::bench
