#include "bench/tidegate_bench/element_io.h"

#include <cstring>

#include "numeric/half.h"

namespace tidegate::bench {

void store_element(tidegate_dtype_t dtype, void* base, int64_t i, double v) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case TIDEGATE_FLOAT64:
      static_cast<double*>(base)[i] = v;
      return;
    case TIDEGATE_FLOAT16:
      static_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v));
      return;
    case TIDEGATE_BFLOAT16:
      static_cast<uint16_t*>(base)[i] = float_to_bf16(static_cast<float>(v));
      return;
    // Through uint64: conversion to an unsigned type wraps, as the library's integer sums do.
    case TIDEGATE_INT32:
      static_cast<int32_t*>(base)[i] =
          static_cast<int32_t>(static_cast<uint64_t>(static_cast<int64_t>(v)));
      return;
    case TIDEGATE_INT64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      return;
    case TIDEGATE_UINT8:
      static_cast<uint8_t*>(base)[i] =
          static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(v)));
      return;
  }
}

double load_element(tidegate_dtype_t dtype, const void* base, int64_t i) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return static_cast<const float*>(base)[i];
    case TIDEGATE_FLOAT64:
      return static_cast<const double*>(base)[i];
    case TIDEGATE_FLOAT16:
      return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case TIDEGATE_BFLOAT16:
      return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case TIDEGATE_INT32:
      return static_cast<const int32_t*>(base)[i];
    case TIDEGATE_INT64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case TIDEGATE_UINT8:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

int64_t exact_integer_limit(tidegate_dtype_t dtype) {
  switch (dtype) {
    case TIDEGATE_FLOAT16:
      return 2048;  // 11-bit significand
    case TIDEGATE_BFLOAT16:
      return 256;  // 8-bit significand
    case TIDEGATE_UINT8:
      return 255;
    default:
      return int64_t{1} << 24;  // float's significand; plenty for the others too
  }
}

bool dtype_is_unsigned(tidegate_dtype_t dtype) { return dtype == TIDEGATE_UINT8; }

uint64_t fnv1a(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace tidegate::bench
