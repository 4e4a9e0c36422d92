#include "reference.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace tidegate::testing {

namespace {

template <class T>
T load(const void* base, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const char*>(base) + i * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return value;
}
template <class T>
void store(void* base, int64_t i, T value) {
  std::memcpy(static_cast<char*>(base) + i * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

// The quieted version of a NaN (the hardware's result of an operation with one NaN input).
float quiet(float f) { return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 0x00400000u); }
double quiet(double d) {
  return std::bit_cast<double>(std::bit_cast<uint64_t>(d) | 0x0008000000000000ull);
}

template <class T>
T float_op(T a, T b, tidegate_reduce_op_t op) {
  if (std::isnan(a)) return a;
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return std::isnan(b) ? quiet(b) : a + b;
    case TIDEGATE_PROD:
      return std::isnan(b) ? quiet(b) : a * b;
    case TIDEGATE_MIN:  // -0 below +0
      return std::isnan(b) ? b : (b < a || (b == a && std::signbit(b)) ? b : a);
    case TIDEGATE_MAX:
      return std::isnan(b) ? b : (b > a || (b == a && !std::signbit(b)) ? b : a);
  }
  return a;
}

template <class T>
T int_op(T a, T b, tidegate_reduce_op_t op) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case TIDEGATE_PROD:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    case TIDEGATE_MIN:
      return a < b ? a : b;
    case TIDEGATE_MAX:
      return a > b ? a : b;
  }
  return a;
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
uint16_t narrow_op(uint16_t a, uint16_t b, tidegate_reduce_op_t op) {
  const float fa = Widen(a);
  const float fb = Widen(b);
  if (op == TIDEGATE_MIN || op == TIDEGATE_MAX) {
    if (std::isnan(fa)) return a;
    if (std::isnan(fb)) return b;
    const bool tie = fb == fa && std::signbit(fb) == (op == TIDEGATE_MIN);  // -0 below +0
    const bool b_wins = tie || (op == TIDEGATE_MIN ? fb < fa : fb > fa);
    return b_wins ? b : a;
  }
  return Narrow(float_op(fa, fb, op));
}

template <class T>
void int_loop(void* dst, const void* a, const void* b, int64_t n, tidegate_reduce_op_t op) {
  for (int64_t i = 0; i < n; ++i) store<T>(dst, i, int_op<T>(load<T>(a, i), load<T>(b, i), op));
}
template <class T>
void float_loop(void* dst, const void* a, const void* b, int64_t n, tidegate_reduce_op_t op) {
  for (int64_t i = 0; i < n; ++i) store<T>(dst, i, float_op<T>(load<T>(a, i), load<T>(b, i), op));
}
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void narrow_loop(void* dst, const void* a, const void* b, int64_t n, tidegate_reduce_op_t op) {
  for (int64_t i = 0; i < n; ++i) {
    store<uint16_t>(dst, i,
                    narrow_op<Widen, Narrow>(load<uint16_t>(a, i), load<uint16_t>(b, i), op));
  }
}

}  // namespace

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float ref_half_to_float(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

uint16_t ref_float_to_half(float f) {
  if (std::isnan(f)) {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7e00u | ((bits >> 13) & 0x3ffu));
  }
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}

float ref_bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t ref_float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // The two bf16 neighbours of f (truncation and the next one away from zero), compared in
  // double, where both differences are exact.
  const uint16_t low = static_cast<uint16_t>(bits >> 16);
  const uint16_t high = static_cast<uint16_t>(low + 1);
  if ((bits & 0xffffu) == 0) return low;
  const double value = f;
  const double below = std::fabs(value - static_cast<double>(ref_bf16_to_float(low)));
  // The neighbour past the largest finite value is infinity; the tie there rounds up too.
  const float high_float = ref_bf16_to_float(high);
  if (std::isinf(high_float)) return (bits & 0xffffu) >= 0x8000u ? high : low;
  const double above = std::fabs(static_cast<double>(high_float) - value);
  if (below < above) return low;
  if (above < below) return high;
  return (low & 1u) ? high : low;
}

void reference_reduce(void* dst, const void* a, const void* b, int64_t count,
                      tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      float_loop<float>(dst, a, b, count, op);
      break;
    case TIDEGATE_FLOAT64:
      float_loop<double>(dst, a, b, count, op);
      break;
    case TIDEGATE_FLOAT16:
      narrow_loop<ref_half_to_float, ref_float_to_half>(dst, a, b, count, op);
      break;
    case TIDEGATE_BFLOAT16:
      narrow_loop<ref_bf16_to_float, ref_float_to_bf16>(dst, a, b, count, op);
      break;
    case TIDEGATE_INT32:
      int_loop<int32_t>(dst, a, b, count, op);
      break;
    case TIDEGATE_INT64:
      int_loop<int64_t>(dst, a, b, count, op);
      break;
    case TIDEGATE_UINT8:
      int_loop<uint8_t>(dst, a, b, count, op);
      break;
  }
}

void reference_finalize(void* buf, int64_t count, tidegate_dtype_t dtype, int world_size) {
  if (world_size <= 1) return;
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case TIDEGATE_FLOAT32:
        store<float>(buf, i, load<float>(buf, i) / static_cast<float>(world_size));
        break;
      case TIDEGATE_FLOAT64:
        store<double>(buf, i, load<double>(buf, i) / world_size);
        break;
      case TIDEGATE_FLOAT16:
        store<uint16_t>(buf, i,
                        ref_float_to_half(ref_half_to_float(load<uint16_t>(buf, i)) /
                                          static_cast<float>(world_size)));
        break;
      case TIDEGATE_BFLOAT16:
        store<uint16_t>(buf, i,
                        ref_float_to_bf16(ref_bf16_to_float(load<uint16_t>(buf, i)) /
                                          static_cast<float>(world_size)));
        break;
      case TIDEGATE_INT32:
        store<int32_t>(buf, i, static_cast<int32_t>(load<int32_t>(buf, i) / int64_t{world_size}));
        break;
      case TIDEGATE_INT64:
        store<int64_t>(buf, i, load<int64_t>(buf, i) / world_size);
        break;
      case TIDEGATE_UINT8:
        store<uint8_t>(buf, i, static_cast<uint8_t>(load<uint8_t>(buf, i) / world_size));
        break;
    }
  }
}

Bytes make_input(tidegate_dtype_t dtype, tidegate_reduce_op_t op, int rank, int64_t count,
                 uint64_t seed) {
  const size_t element = dtype_size(dtype);
  Bytes out(static_cast<size_t>(count) * element);
  const uint64_t base = mix64(seed * 1000003u + static_cast<uint64_t>(rank));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t r = mix64(base + static_cast<uint64_t>(i));
    // Products stay within +-32 with factors in {-2,-1,1,2}; sums within +-40.
    const float small = op == TIDEGATE_PROD
                            ? static_cast<float>(static_cast<int>(r % 4) - 2 + (r % 4 >= 2))
                            : static_cast<float>(static_cast<int>(r % 17) - 8);
    switch (dtype) {
      case TIDEGATE_FLOAT32:
        store<float>(out.data(), i, small);
        break;
      case TIDEGATE_FLOAT64:
        store<double>(out.data(), i, small);
        break;
      case TIDEGATE_FLOAT16:
        store<uint16_t>(out.data(), i, ref_float_to_half(small));
        break;
      case TIDEGATE_BFLOAT16:
        store<uint16_t>(out.data(), i, ref_float_to_bf16(small));
        break;
      case TIDEGATE_INT32:
        store<uint32_t>(out.data(), i, static_cast<uint32_t>(r));
        break;
      case TIDEGATE_INT64:
        store<uint64_t>(out.data(), i, r);
        break;
      case TIDEGATE_UINT8:
        store<uint8_t>(out.data(), i, static_cast<uint8_t>(r));
        break;
    }
  }
  return out;
}

Bytes make_special_input(tidegate_dtype_t dtype, int64_t count, uint64_t seed) {
  Bytes out = make_bytes(static_cast<size_t>(count) * dtype_size(dtype), seed);
  static const uint32_t f32_specials[] = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x7f800000u,
                                          0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u,
                                          0x3f800000u, 0xbf800000u};
  static const uint16_t f16_specials[] = {0x7e01, 0xfe55, 0x7c01, 0x7c00, 0xfc00,
                                          0x0000, 0x8000, 0x0001, 0x3c00, 0x7bff};
  static const uint16_t bf16_specials[] = {0x7fc1, 0xffa5, 0x7f81, 0x7f80, 0xff80,
                                           0x0000, 0x8000, 0x0001, 0x3f80, 0x7f7f};
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t r = mix64(seed ^ (static_cast<uint64_t>(i) << 20));
    if (r % 3 != 0) continue;  // two thirds stay random bit patterns
    const size_t pick = static_cast<size_t>((r >> 8) % 10);
    switch (dtype) {
      case TIDEGATE_FLOAT32:
        store<uint32_t>(out.data(), i, f32_specials[pick]);
        break;
      case TIDEGATE_FLOAT64:
        store<double>(out.data(), i, static_cast<double>(std::bit_cast<float>(f32_specials[pick])));
        break;
      case TIDEGATE_FLOAT16:
        store<uint16_t>(out.data(), i, f16_specials[pick]);
        break;
      case TIDEGATE_BFLOAT16:
        store<uint16_t>(out.data(), i, bf16_specials[pick]);
        break;
      default:
        break;
    }
  }
  return out;
}

Bytes make_bytes(size_t bytes, uint64_t seed) {
  Bytes out(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t r = mix64(seed * 7919u + i);
    std::memcpy(out.data() + i, &r, std::min<size_t>(8, bytes - i));
  }
  return out;
}

Bytes expected_reduction(tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                         const std::vector<Bytes>& inputs, int64_t count) {
  Bytes acc = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    reference_reduce(acc.data(), acc.data(), inputs[r].data(), count, dtype, op);
  }
  if (op == TIDEGATE_AVG)
    reference_finalize(acc.data(), count, dtype, static_cast<int>(inputs.size()));
  return acc;
}

}  // namespace tidegate::testing
