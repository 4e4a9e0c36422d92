// Test support: deterministic per-rank inputs whose reductions are exact in every dtype, and
// conversion of those small values to and from each dtype's bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "tidegate/tidegate.h"

namespace tidegate::testing {

// Small integers (1..4, or 1..2 for prod) so sums and products stay exact even in bfloat16.
inline double input_value(int rank, int64_t index, tidegate_reduce_op_t op) {
  if (op == TIDEGATE_PROD) return static_cast<double>(1 + ((index + rank) % 2));
  return static_cast<double>(1 + ((index * 7 + rank * 3) % 4));
}

// float -> IEEE half / bfloat16 bits, round to nearest even (exact for the values used here).
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t exponent = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 : 0));
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exponent <= 0) return static_cast<uint16_t>(sign);  // tests use no subnormals
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  uint32_t x;
  if (exponent == 0) {
    float f = static_cast<float>(mantissa) / 16777216.0f;  // 2^-24
    return sign ? -f : f;
  }
  if (exponent == 31)
    x = sign | 0x7f800000 | (mantissa << 13);
  else
    x = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}
inline float bf16_to_float(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Writes value (an exact small number) as element i of a dtype buffer.
inline void store_value(void* buffer, tidegate_dtype_t dtype, int64_t i, double v) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      static_cast<float*>(buffer)[i] = static_cast<float>(v);
      break;
    case TIDEGATE_FLOAT64:
      static_cast<double*>(buffer)[i] = v;
      break;
    case TIDEGATE_FLOAT16:
      static_cast<uint16_t*>(buffer)[i] = float_to_half(static_cast<float>(v));
      break;
    case TIDEGATE_BFLOAT16:
      static_cast<uint16_t*>(buffer)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case TIDEGATE_INT32:
      static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(v);
      break;
    case TIDEGATE_INT64:
      static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(v);
      break;
    case TIDEGATE_UINT8:
      static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
  }
}

inline double load_value(const void* buffer, tidegate_dtype_t dtype, int64_t i) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return static_cast<const float*>(buffer)[i];
    case TIDEGATE_FLOAT64:
      return static_cast<const double*>(buffer)[i];
    case TIDEGATE_FLOAT16:
      return half_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case TIDEGATE_BFLOAT16:
      return bf16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case TIDEGATE_INT32:
      return static_cast<const int32_t*>(buffer)[i];
    case TIDEGATE_INT64:
      return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case TIDEGATE_UINT8:
      return static_cast<const uint8_t*>(buffer)[i];
  }
  return 0;
}

inline bool is_integer(tidegate_dtype_t dtype) {
  return dtype == TIDEGATE_INT32 || dtype == TIDEGATE_INT64 || dtype == TIDEGATE_UINT8;
}

// The expected reduction of input_value over `size` ranks at index i, in dtype's semantics.
inline double expected_value(int size, int64_t i, tidegate_reduce_op_t op, tidegate_dtype_t dtype) {
  double acc = input_value(0, i, op);
  for (int r = 1; r < size; ++r) {
    const double v = input_value(r, i, op);
    switch (op) {
      case TIDEGATE_SUM:
      case TIDEGATE_AVG:
        acc += v;
        break;
      case TIDEGATE_PROD:
        acc *= v;
        break;
      case TIDEGATE_MIN:
        acc = v < acc ? v : acc;
        break;
      case TIDEGATE_MAX:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (op == TIDEGATE_AVG) {
    acc = is_integer(dtype) ? static_cast<double>(static_cast<int64_t>(acc) / size) : acc / size;
  }
  return acc;
}

}  // namespace tidegate::testing
