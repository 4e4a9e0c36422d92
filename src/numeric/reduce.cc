// Reduction kernels. This file is compiled with -O3 -fno-trapping-math (see CMakeLists.txt):
// the vectoriser needs its full cost model, and permission to compute both sides of the NaN
// selects below (tidegate never reads floating-point exception flags). The sum kernels, which
// carry almost all gradient traffic, are also cloned for AVX2 and chosen at load time (no
// -march=native: the library must run on every node of a cluster). Measured on one core,
// 1 MiB segments in cache: f32 sum about 20 GB/s vectorised against 4 GB/s scalar.
#include "numeric/reduce.h"

#include <cmath>
#include <type_traits>

#include "numeric/avx2_clones.h"
#include "numeric/half.h"

namespace tidegate {

namespace {

template <class T>
using Unsigned = std::make_unsigned_t<T>;

// One element of each operation. Float variants compute every candidate unconditionally and
// then select, so the NaN rule becomes vector selects instead of branches; the comparisons
// are the quiet builtins, which never raise on NaN and so may be evaluated speculatively.
struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T sum = a + b;
      return a != a ? a : sum;
    } else {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    }
  }
};

struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T product = a * b;
      return a != a ? a : product;
    } else {
      return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
    }
  }
};

// Min and max order -0 below +0 (the only distinct values that compare equal), so that their
// result never depends on which operand comes first, and propagate NaN.
struct Min {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T smaller = __builtin_isless(b, a) || (b == a && std::signbit(b)) ? b : a;
      return a != a ? a : (b != b ? b : smaller);
    } else {
      return b < a ? b : a;
    }
  }
};

struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      const T larger = __builtin_isgreater(b, a) || (b == a && !std::signbit(b)) ? b : a;
      return a != a ? a : (b != b ? b : larger);
    } else {
      return b > a ? b : a;
    }
  }
};

struct F16 {
  static float widen(uint16_t v) { return half_to_float(v); }
  static uint16_t narrow(float v) { return float_to_half(v); }
};
struct BF16 {
  static float widen(uint16_t v) { return bf16_to_float(v); }
  static uint16_t narrow(float v) { return float_to_bf16(v); }
};

// 16-bit floats: sum and product round once from float.
template <class Format, class Op>
struct Narrow {
  static uint16_t apply(uint16_t a, uint16_t b) {
    return Format::narrow(Op::apply(Format::widen(a), Format::widen(b)));
  }
};

// 16-bit floats: min and max return one operand's bits unchanged (choosing needs no
// rounding), under the same NaN and signed-zero rules as the wide types.
template <class Format, bool kMin>
struct NarrowSelect {
  static uint16_t apply(uint16_t a, uint16_t b) {
    const float wide_a = Format::widen(a);
    const float wide_b = Format::widen(b);
    const bool tie_to_b = wide_b == wide_a && (std::signbit(wide_b) == kMin);
    const bool b_wins =
        tie_to_b || (kMin ? __builtin_isless(wide_b, wide_a) : __builtin_isgreater(wide_b, wide_a));
    const uint16_t chosen = b_wins ? b : a;
    return wide_a != wide_a ? a : (wide_b != wide_b ? b : chosen);
  }
};

// The three aliasing cases get their own loops with __restrict pointers, so that in-place
// reduction (dst == a or dst == b) vectorises without a runtime overlap check falling back to
// scalar code.
template <class T, class Op>
[[gnu::always_inline]] inline void loop_separate(T* __restrict dst, const T* __restrict a,
                                                 const T* __restrict b, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = Op::apply(a[i], b[i]);
}

template <class T, class Op>
[[gnu::always_inline]] inline void loop_into_a(T* __restrict dst, const T* __restrict b,
                                               int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], b[i]);
}

template <class T, class Op>
[[gnu::always_inline]] inline void loop_into_b(T* __restrict dst, const T* __restrict a,
                                               int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = Op::apply(a[i], dst[i]);
}

template <class T, class Op>
[[gnu::always_inline]] inline void combine(void* dst_bytes, const void* a_bytes,
                                           const void* b_bytes, int64_t count) {
  T* dst = static_cast<T*>(dst_bytes);
  const T* a = static_cast<const T*>(a_bytes);
  const T* b = static_cast<const T*>(b_bytes);
  if (dst == a && dst == b) {
    for (int64_t i = 0; i < count; ++i) dst[i] = Op::apply(dst[i], dst[i]);
  } else if (dst == a) {
    loop_into_a<T, Op>(dst, b, count);
  } else if (dst == b) {
    loop_into_b<T, Op>(dst, a, count);
  } else {
    loop_separate<T, Op>(dst, a, b, count);
  }
}

using Kernel = void (*)(void*, const void*, const void*, int64_t);

template <class T, class Op>
void kernel(void* dst, const void* a, const void* b, int64_t count) {
  combine<T, Op>(dst, a, b, count);
}

// The hot kernels (sum and average carry almost all gradient traffic), cloned for AVX2; the
// loader picks the clone once per process. Both clones compute the same bits: the vector
// width changes how many elements one instruction handles, never an element's result.
TG_AVX2_CLONES void sum_f32(void* dst, const void* a, const void* b, int64_t count) {
  combine<float, Sum>(dst, a, b, count);
}

TG_AVX2_CLONES void sum_f64(void* dst, const void* a, const void* b, int64_t count) {
  combine<double, Sum>(dst, a, b, count);
}

TG_AVX2_CLONES void sum_f16(void* dst, const void* a, const void* b, int64_t count) {
  combine<uint16_t, Narrow<F16, Sum>>(dst, a, b, count);
}

TG_AVX2_CLONES void sum_bf16(void* dst, const void* a, const void* b, int64_t count) {
  combine<uint16_t, Narrow<BF16, Sum>>(dst, a, b, count);
}

// NarrowOp is the 16-bit float variant of Op.
template <class Op, template <class> class NarrowOp>
Kernel kernel_for_dtype(tidegate_dtype_t dtype) {
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      return kernel<float, Op>;
    case TIDEGATE_FLOAT64:
      return kernel<double, Op>;
    case TIDEGATE_FLOAT16:
      return kernel<uint16_t, NarrowOp<F16>>;
    case TIDEGATE_BFLOAT16:
      return kernel<uint16_t, NarrowOp<BF16>>;
    case TIDEGATE_INT32:
      return kernel<int32_t, Op>;
    case TIDEGATE_INT64:
      return kernel<int64_t, Op>;
    case TIDEGATE_UINT8:
      return kernel<uint8_t, Op>;
  }
  return nullptr;
}

template <class Format>
using NarrowSum = Narrow<Format, Sum>;
template <class Format>
using NarrowProd = Narrow<Format, Prod>;
template <class Format>
using NarrowMin = NarrowSelect<Format, true>;
template <class Format>
using NarrowMax = NarrowSelect<Format, false>;

Kernel select_kernel(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  switch (op) {
    case TIDEGATE_SUM:
    case TIDEGATE_AVG:
      if (dtype == TIDEGATE_FLOAT32) return sum_f32;
      if (dtype == TIDEGATE_FLOAT64) return sum_f64;
      if (dtype == TIDEGATE_FLOAT16) return sum_f16;
      if (dtype == TIDEGATE_BFLOAT16) return sum_bf16;
      return kernel_for_dtype<Sum, NarrowSum>(dtype);
    case TIDEGATE_PROD:
      return kernel_for_dtype<Prod, NarrowProd>(dtype);
    case TIDEGATE_MIN:
      return kernel_for_dtype<Min, NarrowMin>(dtype);
    case TIDEGATE_MAX:
      return kernel_for_dtype<Max, NarrowMax>(dtype);
  }
  return nullptr;
}

// Floats divide in their own precision; integers divide as int64 so that a world size above
// the type's range (256 ranks of uint8) stays a valid divisor.
template <class T>
void divide(void* buf, int64_t count, int world_size) {
  T* values = static_cast<T*>(buf);
  if constexpr (std::is_floating_point_v<T>) {
    const T divisor = static_cast<T>(world_size);
    for (int64_t i = 0; i < count; ++i) values[i] = values[i] / divisor;
  } else {
    const int64_t divisor = world_size;
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / divisor);
  }
}

template <class Format>
void divide_narrow(void* buf, int64_t count, int world_size) {
  uint16_t* values = static_cast<uint16_t*>(buf);
  const float divisor = static_cast<float>(world_size);
  for (int64_t i = 0; i < count; ++i) {
    values[i] = Format::narrow(Format::widen(values[i]) / divisor);
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, int64_t count, tidegate_dtype_t dtype,
            tidegate_reduce_op_t op) {
  if (count <= 0) return;
  const Kernel k = select_kernel(dtype, op);
  if (k != nullptr) k(dst, a, b, count);
}

void finalize_average(void* buf, int64_t count, tidegate_dtype_t dtype, int world_size) {
  if (world_size <= 1 || count <= 0) return;
  switch (dtype) {
    case TIDEGATE_FLOAT32:
      divide<float>(buf, count, world_size);
      break;
    case TIDEGATE_FLOAT64:
      divide<double>(buf, count, world_size);
      break;
    case TIDEGATE_FLOAT16:
      divide_narrow<F16>(buf, count, world_size);
      break;
    case TIDEGATE_BFLOAT16:
      divide_narrow<BF16>(buf, count, world_size);
      break;
    case TIDEGATE_INT32:
      divide<int32_t>(buf, count, world_size);
      break;
    case TIDEGATE_INT64:
      divide<int64_t>(buf, count, world_size);
      break;
    case TIDEGATE_UINT8:
      divide<uint8_t>(buf, count, world_size);
      break;
  }
}

}  // namespace tidegate
