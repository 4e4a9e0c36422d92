// Reading and writing one element of any tidegate dtype as a double, with the library's own
// float16/bfloat16 conversions (so that the expected bits are produced the way the library
// rounds), and hashing buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tidegate/tidegate.h"

namespace tidegate::bench {

// base[i] = v converted to dtype (integers wrap like the library's reductions).
void store_element(tidegate_dtype_t dtype, void* base, int64_t i, double v);
double load_element(tidegate_dtype_t dtype, const void* base, int64_t i);
// Largest n such that every integer in [-n, n] is exact in dtype (255 for uint8).
int64_t exact_integer_limit(tidegate_dtype_t dtype);
bool dtype_is_unsigned(tidegate_dtype_t dtype);
// 64-bit FNV-1a.
uint64_t fnv1a(const void* data, size_t bytes);

}  // namespace tidegate::bench
