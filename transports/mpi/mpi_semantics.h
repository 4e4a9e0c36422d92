// Which reductions MPI computes exactly as tidegate's own algorithms do (tidegate.h,
// "Reduction semantics"), measured rather than assumed.
//
// Why measure: MPI leaves overflow and NaN handling to the implementation, and Open MPI 4.1's
// vectorised reductions (its AVX op component) saturate 8-bit sums (128 + 129 = 255) where
// tidegate wraps (1), and its float min/max drop a NaN depending on operand order where
// tidegate propagates it. A native collective that computes other values than the algorithms
// it stands in for would make a result depend on the plan (and so on the message size and the
// run). The transport therefore runs MPI's reduction on edge values (overflow, NaN, +-0,
// infinities, the type's extremes), at lengths that take its vector and scalar paths, compares
// every result bit for bit with numeric/reduce.h, and offers "native" only where they agree.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "base/status.h"
#include "tidegate/tidegate.h"

namespace tidegate::mpi {

// One bit per (dtype, reduce op); see reduction_bit().
using ReductionSet = uint64_t;

inline constexpr int kReduceOps = 5;  // TIDEGATE_SUM .. TIDEGATE_AVG

// The bit of (dtype, op) in a ReductionSet. AVG shares SUM's bit: it is SUM, then tidegate's
// own division (numeric/reduce.h's finalize_average) on every rank.
inline ReductionSet reduction_bit(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  const int o = op == TIDEGATE_AVG ? static_cast<int>(TIDEGATE_SUM) : static_cast<int>(op);
  return ReductionSet{1} << (static_cast<int>(dtype) * kReduceOps + o);
}

// The reductions whose MPI results on this rank equal tidegate's bit for bit (local only; no
// communication). Uses MPI_Reduce_local, so MPI must be initialised.
ReductionSet measure_agreeing_reductions();

// The intersection over every rank of `comm` of the local sets (MPI_Allreduce with MPI_BAND):
// ranks on different CPUs may take different vector paths, and every rank must plan alike.
// Collective over `comm`.
Status agree_on_reductions(MPI_Comm comm, ReductionSet local, ReductionSet* agreed);

}  // namespace tidegate::mpi
