// The reduction kernels and 16-bit float conversions against independent scalar references:
// every dtype and op, NaN payloads, infinities, signed zeros, subnormals, f16/bf16 rounding
// (ties to even), integer wrap-around, and the three aliasing forms the algorithms use.
#include "numeric/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "numeric/half.h"
#include "reference.h"

namespace tidegate::testing {
namespace {

const tidegate_dtype_t kDtypes[] = {TIDEGATE_FLOAT32,  TIDEGATE_FLOAT64, TIDEGATE_FLOAT16,
                                    TIDEGATE_BFLOAT16, TIDEGATE_INT32,   TIDEGATE_INT64,
                                    TIDEGATE_UINT8};
const tidegate_reduce_op_t kOps[] = {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN, TIDEGATE_MAX,
                                     TIDEGATE_PROD};

TEST(HalfConversion, EveryHalfWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const uint32_t got = float_bits(half_to_float(half));
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
      // NaN: sign and payload move over unchanged.
      EXPECT_EQ(got, ((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13)) << std::hex << h;
    } else {
      EXPECT_EQ(got, float_bits(ref_half_to_float(half))) << std::hex << h;
    }
  }
}

TEST(HalfConversion, NarrowingRoundsToNearestEven) {
  // Every tie between two neighbouring halves, and the points just around it.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double low = ref_half_to_float(static_cast<uint16_t>(h));
    const double high = ref_half_to_float(static_cast<uint16_t>(h + 1));
    const float tie = static_cast<float>((low + high) / 2);
    for (float f : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 1e9f), -tie}) {
      ASSERT_EQ(float_to_half(f), ref_float_to_half(f)) << f;
    }
  }
  // A spread of all floats, specials included.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    const float f = bits_float(static_cast<uint32_t>(bits));
    ASSERT_EQ(float_to_half(f), ref_float_to_half(f)) << std::hex << bits;
  }
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);                 // below the tie: largest finite
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                 // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(bits_float(0x7f800123u)), 0x7e00);  // signalling NaN gets quieted
}

TEST(Bfloat16Conversion, NarrowingRoundsToNearestEven) {
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099) {
    const float f = bits_float(static_cast<uint32_t>(bits));
    ASSERT_EQ(float_to_bf16(f), ref_float_to_bf16(f)) << std::hex << bits;
  }
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);  // overflow to infinity
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
}

// Runs the kernel in one aliasing form and compares with the reference, byte for byte.
void check_kernel(tidegate_dtype_t dtype, tidegate_reduce_op_t op, int alias, int64_t count) {
  const Bytes a = make_special_input(dtype, count, 11 + static_cast<uint64_t>(dtype));
  const Bytes b = make_special_input(dtype, count, 97 + static_cast<uint64_t>(op));
  Bytes expected(a.size());
  const Bytes& second = alias == 3 ? a : b;
  reference_reduce(expected.data(), a.data(), second.data(), count, dtype, op);
  Bytes got(a.size());
  switch (alias) {
    case 0:
      reduce(got.data(), a.data(), b.data(), count, dtype, op);
      break;
    case 1:
      got = a;
      reduce(got.data(), got.data(), b.data(), count, dtype, op);
      break;
    case 2:
      got = b;
      reduce(got.data(), a.data(), got.data(), count, dtype, op);
      break;
    default:
      got = a;
      reduce(got.data(), got.data(), got.data(), count, dtype, op);
      break;
  }
  const size_t element = dtype_size(dtype);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(0, std::memcmp(got.data() + i * element, expected.data() + i * element, element))
        << "element " << i << " dtype " << dtype << " op " << op << " alias " << alias;
  }
}

TEST(ReduceKernel, EveryDtypeOpAndAliasMatchesReference) {
  for (tidegate_dtype_t dtype : kDtypes) {
    for (tidegate_reduce_op_t op : kOps) {
      for (int alias = 0; alias < 4; ++alias) {
        // 1037: not a multiple of any vector width, so the scalar tails run too.
        check_kernel(dtype, op, alias, 1037);
        check_kernel(dtype, op, alias, 3);
      }
    }
  }
}

TEST(ReduceKernel, IntegersWrapAround) {
  int32_t a32[] = {INT32_MAX, INT32_MIN, 70000};
  int32_t b32[] = {1, -1, 70000};
  reduce(a32, a32, b32, 2, TIDEGATE_INT32, TIDEGATE_SUM);
  EXPECT_EQ(a32[0], INT32_MIN);
  EXPECT_EQ(a32[1], INT32_MAX);
  reduce(a32 + 2, a32 + 2, b32 + 2, 1, TIDEGATE_INT32, TIDEGATE_PROD);
  EXPECT_EQ(a32[2], static_cast<int32_t>(70000u * 70000u));
  int64_t a64[] = {INT64_MAX};
  int64_t b64[] = {2};
  reduce(a64, a64, b64, 1, TIDEGATE_INT64, TIDEGATE_PROD);
  EXPECT_EQ(a64[0], -2);
  uint8_t a8[] = {200, 16};
  uint8_t b8[] = {100, 17};
  reduce(a8, a8, b8, 1, TIDEGATE_UINT8, TIDEGATE_SUM);
  reduce(a8 + 1, a8 + 1, b8 + 1, 1, TIDEGATE_UINT8, TIDEGATE_PROD);
  EXPECT_EQ(a8[0], 44);
  EXPECT_EQ(a8[1], static_cast<uint8_t>(16 * 17));
}

TEST(ReduceKernel, NanPropagationIsFixedByOperandOrder) {
  const float nan_a = bits_float(0x7fc0000au);
  const float nan_b = bits_float(0xffc0000bu);
  float a[] = {nan_a, 1.0f, nan_a, 1.0f};
  float b[] = {2.0f, nan_b, nan_b, 2.0f};
  for (tidegate_reduce_op_t op : kOps) {
    float out[4];
    reduce(out, a, b, 4, TIDEGATE_FLOAT32, op);
    EXPECT_EQ(float_bits(out[0]), 0x7fc0000au) << op;  // a is NaN: a
    EXPECT_EQ(float_bits(out[1]), 0xffc0000bu) << op;  // only b is NaN: b (quiet already)
    EXPECT_EQ(float_bits(out[2]), 0x7fc0000au) << op;  // both: a, the canonical first
  }
}

TEST(ReduceKernel, SixteenBitFloatsRoundOncePerOperation) {
  // f16 has 11 significant bits: above 2048 the spacing is 2, and ties go to even.
  uint16_t a[] = {ref_float_to_half(2048.0f), ref_float_to_half(2048.0f)};
  uint16_t b[] = {ref_float_to_half(1.0f), ref_float_to_half(3.0f)};
  reduce(a, a, b, 2, TIDEGATE_FLOAT16, TIDEGATE_SUM);
  EXPECT_EQ(half_to_float(a[0]), 2048.0f);
  EXPECT_EQ(half_to_float(a[1]), 2052.0f);
  // bf16 has 8: above 256 the spacing is 2.
  uint16_t c[] = {float_to_bf16(256.0f), float_to_bf16(256.0f)};
  uint16_t d[] = {float_to_bf16(1.0f), float_to_bf16(3.0f)};
  reduce(c, c, d, 2, TIDEGATE_BFLOAT16, TIDEGATE_SUM);
  EXPECT_EQ(bf16_to_float(c[0]), 256.0f);
  EXPECT_EQ(bf16_to_float(c[1]), 260.0f);
}

TEST(FinalizeAverage, DividesOnceByWorldSize) {
  int32_t ints[] = {-7, 7, INT32_MIN};
  finalize_average(ints, 3, TIDEGATE_INT32, 2);
  EXPECT_EQ(ints[0], -3);  // truncates toward zero
  EXPECT_EQ(ints[1], 3);
  EXPECT_EQ(ints[2], INT32_MIN / 2);
  uint8_t bytes[] = {255};
  finalize_average(bytes, 1, TIDEGATE_UINT8, 256);  // divisor beyond uint8 stays valid
  EXPECT_EQ(bytes[0], 0);
  float floats[] = {1.0f};
  finalize_average(floats, 1, TIDEGATE_FLOAT32, 3);
  EXPECT_EQ(floats[0], 1.0f / 3.0f);
  uint16_t halves[] = {ref_float_to_half(1.0f)};
  finalize_average(halves, 1, TIDEGATE_FLOAT16, 3);
  EXPECT_EQ(halves[0], ref_float_to_half(1.0f / 3.0f));
  for (tidegate_dtype_t dtype : kDtypes) {
    Bytes data = make_special_input(dtype, 64, 5);
    Bytes expected = data;
    reference_finalize(expected.data(), 64, dtype, 5);
    finalize_average(data.data(), 64, dtype, 5);
    EXPECT_EQ(data, expected) << "dtype " << dtype;
  }
}

TEST(FinalizeAverage, SingleRankKeepsBitsAndZeroCountIsNoop) {
  const float nan = bits_float(0x7f800001u);  // signalling: would be quieted by a division
  float values[] = {nan};
  finalize_average(values, 1, TIDEGATE_FLOAT32, 1);
  EXPECT_EQ(float_bits(values[0]), 0x7f800001u);
  reduce(nullptr, nullptr, nullptr, 0, TIDEGATE_FLOAT32, TIDEGATE_SUM);
  finalize_average(nullptr, 0, TIDEGATE_FLOAT32, 4);
}

}  // namespace
}  // namespace tidegate::testing
