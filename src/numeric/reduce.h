// Element-wise reduction kernels used by every reducing algorithm (host memory).
//
// Bitwise-identical results on every rank (DESIGN.md "Identical results") rest on three rules
// that these kernels keep and that callers must keep too:
//   - Integers wrap modulo 2^bits (computed in unsigned arithmetic: no undefined behaviour).
//   - f16/bf16 are widened to float, combined once and rounded to nearest-even once per
//     binary operation, by integer code that does not depend on CPU features or flags.
//   - The result depends on which operand is `a` and which is `b` only for NaN payloads (two
//     different NaNs); callers therefore pass operands in a canonical order that every rank
//     agrees on (the value of the lower-ranked group first). NaN propagation is fixed:
//     sum/prod return `a` when `a` is NaN, else the hardware's quieted `b`; min/max return
//     `a` when it is NaN, else `b` when it is NaN, else the smaller/larger value, with -0
//     below +0 (min(-0, +0) = -0, max = +0, in either order).
// These are the semantics tidegate.h documents for every dtype x op; a transport offers a
// native reduction only where it computes the same (transports/mpi/mpi_semantics.h).
#pragma once

#include <cstdint>

#include "tidegate/tidegate.h"

namespace tidegate {

// dst[i] = a[i] op b[i] for i in [0, count). AVG reduces as SUM (see finalize_average).
// dst may be the same memory as a, as b, or both; otherwise the three ranges must not
// overlap. count <= 0 does nothing. dtype and op must be valid (checked by the caller).
// Thread-safe (touches only its arguments).
void reduce(void* dst, const void* a, const void* b, int64_t count, tidegate_dtype_t dtype,
            tidegate_reduce_op_t op);

// The last step of AVG: buf[i] = buf[i] / world_size, computed once by the rank that owns the
// value. Floats divide in their own precision (f16/bf16 in float, rounded once); integers use
// C++ division, truncating toward zero (the sum itself wrapped). Does nothing when
// world_size <= 1, so a single rank returns its input bit for bit.
void finalize_average(void* buf, int64_t count, tidegate_dtype_t dtype, int world_size);

}  // namespace tidegate
