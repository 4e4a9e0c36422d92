// Independent, scalar implementations of the reduction rules documented in
// src/collectives/reduce.h (f16 through the compiler's _Float16, bf16 through a double-based
// nearest-even search), and test inputs that keep float reductions exact so that every
// algorithm, in whatever order it combines, must match the reference bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "base/types.h"

namespace tidegate::testing {

using Bytes = std::vector<unsigned char>;

float ref_half_to_float(uint16_t h);
uint16_t ref_float_to_half(float f);  // nearest-even; NaN: quieted, top payload bits kept
float ref_bf16_to_float(uint16_t b);
uint16_t ref_float_to_bf16(float f);  // nearest-even; NaN: quieted

// dst[i] = a[i] op b[i] by the documented rule (AVG reduces as SUM).
void reference_reduce(void* dst, const void* a, const void* b, int64_t count,
                      tidegate_dtype_t dtype, tidegate_reduce_op_t op);
// buf[i] /= world_size by the documented rule (no-op for a single rank).
void reference_finalize(void* buf, int64_t count, tidegate_dtype_t dtype, int world_size);

// Inputs for collective tests: small integers for float types (sums and products of up to
// five ranks stay exact, even in bf16), full-range random values for integer types (so sums
// and products wrap).
Bytes make_input(tidegate_dtype_t dtype, tidegate_reduce_op_t op, int rank, int64_t count,
                 uint64_t seed);
// Random bit patterns mixed with NaNs (with payloads), infinities, zeros of both signs and
// subnormals: for the kernel tests.
Bytes make_special_input(tidegate_dtype_t dtype, int64_t count, uint64_t seed);
// Random bytes for collectives that only move data.
Bytes make_bytes(size_t bytes, uint64_t seed);

// The allreduce result of `inputs` (one per rank, `count` elements each), AVG finalised.
Bytes expected_reduction(tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                         const std::vector<Bytes>& inputs, int64_t count);

uint64_t mix64(uint64_t x);  // splitmix64 finaliser, for reproducible pseudo-random data

}  // namespace tidegate::testing
