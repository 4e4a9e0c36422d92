// Allreduce through the whole stack (C API -> communicator -> engine -> algorithm -> TCP over
// loopback), ranks as threads: every rank count {1..5} x size x dtype x op, checked against a
// reference and for bitwise-identical results on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "test_values.h"
#include "thread_world.h"

namespace tidegate::testing {
namespace {

using Param = std::tuple<int, int64_t, tidegate_dtype_t, tidegate_reduce_op_t>;

class AllreduceStack : public ::testing::TestWithParam<Param> {};

double tolerance(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  if (op != TIDEGATE_AVG || is_integer(dtype)) return 0.0;  // exact
  switch (dtype) {
    case TIDEGATE_FLOAT16:
    case TIDEGATE_BFLOAT16:
      return 1e-2;
    case TIDEGATE_FLOAT32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

TEST_P(AllreduceStack, MatchesReferenceAndIsBitwiseIdentical) {
  const auto [ranks, count, dtype, op] = GetParam();
  ThreadWorld& world = ThreadWorld::shared(ranks);
  const size_t bytes = static_cast<size_t>(count) * tidegate_dtype_size(dtype);
  // Alternate in-place and out-of-place by count so both paths see every dtype and op.
  const bool in_place = count % 2 == 1;
  std::vector<std::vector<unsigned char>> outputs(ranks, std::vector<unsigned char>(bytes));
  std::vector<std::string> errors(ranks);

  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<unsigned char> input(bytes);
    for (int64_t i = 0; i < count; ++i)
      store_value(input.data(), dtype, i, input_value(rank, i, op));
    void* out_ptr = in_place ? input.data() : outputs[rank].data();
    tidegate_tensor_t in = tidegate_host_tensor(input.data(), count, dtype);
    tidegate_tensor_t out = tidegate_host_tensor(out_ptr, count, dtype);
    if (tidegate_allreduce(comm, &in, &out, op) != TIDEGATE_OK) {
      errors[rank] = tidegate_last_error();
      return;
    }
    if (in_place && bytes > 0) std::memcpy(outputs[rank].data(), input.data(), bytes);
  });

  for (int r = 0; r < ranks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  const double tol = tolerance(dtype, op);
  int64_t wrong = 0;
  for (int64_t i = 0; i < count && wrong < 5; ++i) {
    const double want = expected_value(ranks, i, op, dtype);
    const double got = load_value(outputs[0].data(), dtype, i);
    if (std::fabs(got - want) > tol * std::fabs(want)) {
      ADD_FAILURE() << "element " << i << ": got " << got << ", want " << want;
      ++wrong;
    }
  }
  for (int r = 1; r < ranks && bytes > 0; ++r) {  // empty outputs have no data pointer
    EXPECT_EQ(0, std::memcmp(outputs[0].data(), outputs[r].data(), bytes))
        << "rank " << r << "'s result differs bitwise from rank 0's";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [ranks, count, dtype, op] = info.param;
  static const char* dtypes[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
  static const char* ops[] = {"sum", "avg", "min", "max", "prod"};
  return "r" + std::to_string(ranks) + "_n" + std::to_string(count) + "_" + dtypes[dtype] + "_" +
         ops[op];
}

INSTANTIATE_TEST_SUITE_P(
    AllRanksSizesDtypesOps, AllreduceStack,
    ::testing::Combine(
        ::testing::Values(1, 2, 3, 4, 5),
        ::testing::Values<int64_t>(0, 1, 7, 1023, (int64_t{1} << 20) + 3),
        ::testing::Values(TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16, TIDEGATE_BFLOAT16,
                          TIDEGATE_INT32, TIDEGATE_INT64, TIDEGATE_UINT8),
        ::testing::Values(TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN, TIDEGATE_MAX, TIDEGATE_PROD)),
    param_name);

}  // namespace
}  // namespace tidegate::testing
