// Shared pieces of the parameterised collective tests: the matrix (transports x ranks x sizes
// x dtypes x ops), tensor views over test buffers, and a runner that expects every rank to
// succeed.
//
// The transport axis: the in-process loopback runs every dtype and op; the real transports
// that run as threads of one process (tcp, ucx) run the same cases with a reduced dtype/op set,
// since what they add is the message pattern on a real wire, not the arithmetic, and the suite
// must stay fast on two cores. Each fixture is instantiated once per transport, so test names
// carry it: loopback/AllreduceTest..., tcp/AllreduceTest...
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/transport_registry.h"
#include "collectives/collective_args.h"
#include "harness.h"
#include "reference.h"
#include "transport_worlds.h"

namespace tidegate::testing {

inline const std::vector<int>& world_sizes() {
  static const std::vector<int> sizes = {1, 2, 3, 4, 5};
  return sizes;
}
inline const std::vector<int64_t>& element_counts() {
  static const std::vector<int64_t> counts = {0, 1, 7, 1023, (int64_t{1} << 20) + 3};
  return counts;
}
inline constexpr int64_t kLargeCount = (int64_t{1} << 20) + 3;

inline const std::vector<tidegate_dtype_t>& all_dtypes() {
  static const std::vector<tidegate_dtype_t> dtypes = {
      TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16, TIDEGATE_BFLOAT16,
      TIDEGATE_INT32,   TIDEGATE_INT64,   TIDEGATE_UINT8};
  return dtypes;
}
inline const std::vector<tidegate_reduce_op_t>& all_ops() {
  static const std::vector<tidegate_reduce_op_t> ops = {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MIN,
                                                        TIDEGATE_MAX, TIDEGATE_PROD};
  return ops;
}

// The (dtype, op) pairs a case runs: everything for small counts; for the large count the
// full op set on f32 and i32 and a sum on the other types (the suite must stay fast on two
// cores); a single pair when `reduced`.
inline std::vector<std::pair<tidegate_dtype_t, tidegate_reduce_op_t>> dtype_op_pairs(int64_t count,
                                                                                     bool reduced) {
  std::vector<std::pair<tidegate_dtype_t, tidegate_reduce_op_t>> pairs;
  if (reduced && count >= kLargeCount)
    return {{TIDEGATE_FLOAT32, TIDEGATE_SUM}, {TIDEGATE_BFLOAT16, TIDEGATE_AVG}};
  for (tidegate_dtype_t dtype : all_dtypes()) {
    for (tidegate_reduce_op_t op : all_ops()) {
      const bool full = count < kLargeCount || dtype == TIDEGATE_FLOAT32 || dtype == TIDEGATE_INT32;
      if (full || op == TIDEGATE_SUM) pairs.emplace_back(dtype, op);
    }
  }
  return pairs;
}

inline bool is_loopback(const std::string& transport) { return transport == kLoopback; }

// Whether the matrix has cases for `transport` in this build.
inline bool matrix_has(const std::string& transport) {
  return is_loopback(transport) || find_transport(transport) != nullptr;
}

// dtype_op_pairs() on the loopback; on a real transport f32 sum and, unless `reduced`, a
// 16-bit average (another element size, so other segment and block boundaries).
inline std::vector<std::pair<tidegate_dtype_t, tidegate_reduce_op_t>> matrix_pairs(
    const std::string& transport, int64_t count, bool reduced) {
  if (is_loopback(transport)) return dtype_op_pairs(count, reduced);
  if (reduced) return {{TIDEGATE_FLOAT32, TIDEGATE_SUM}};
  return {{TIDEGATE_FLOAT32, TIDEGATE_SUM}, {TIDEGATE_BFLOAT16, TIDEGATE_AVG}};
}

// OK when `transport` can run `ranks` ranks here (connecting a real transport's shared world);
// UNSUPPORTED when it cannot run here at all.
inline Status transport_ready(const std::string& transport, int ranks) {
  if (is_loopback(transport)) return Status::ok();
  std::vector<Transport*> transports;
  return shared_transports(transport, ranks, &transports);
}

inline TensorView view(void* data, int64_t count, tidegate_dtype_t dtype) {
  TensorView v;
  v.data = data;
  v.count = count;
  v.dtype = dtype;
  return v;
}

inline std::string describe(tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  return std::string(dtype_name(dtype)) + " " + reduce_op_name(op);
}

// Runs args_for(rank) on every rank and expects success everywhere; when `algorithm` is not
// empty, also that the task used it.
inline void run_expect_ok(int ranks, const Config& config,
                          const std::function<CollectiveArgs(int rank)>& args_for,
                          const std::string& what, const std::string& algorithm = "",
                          const RunOptions& options = {}) {
  std::vector<std::string> used(static_cast<size_t>(ranks));
  const std::vector<Status> results = run_ranks(
      ranks, config,
      [&](const TaskContext& context) {
        return run_collective(context, args_for(context.rank), Deadline::after(options.timeout),
                              &used[static_cast<size_t>(context.rank)]);
      },
      options);
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(results[static_cast<size_t>(r)].is_ok())
        << what << ": rank " << r << ": " << results[static_cast<size_t>(r)].to_string();
    if (!algorithm.empty()) {
      EXPECT_EQ(used[static_cast<size_t>(r)], algorithm) << what;
    }
  }
}

// Options that run on `transport`.
inline RunOptions on(const std::string& transport) {
  RunOptions options;
  options.transport = transport;
  return options;
}

using SizeCase = std::tuple<std::string, int, int64_t>;  // transport, ranks, element count

// Every world size x element count on `transport` (none when the build lacks it).
inline std::vector<SizeCase> size_cases(const std::string& transport) {
  std::vector<SizeCase> cases;
  if (!matrix_has(transport)) return cases;
  for (int ranks : world_sizes()) {
    for (int64_t count : element_counts()) cases.emplace_back(transport, ranks, count);
  }
  return cases;
}

inline std::string size_case_name(const ::testing::TestParamInfo<SizeCase>& info) {
  return "P" + std::to_string(std::get<1>(info.param)) + "_N" +
         std::to_string(std::get<2>(info.param));
}

// Element index of the first difference, or -1.
inline int64_t first_difference(const Bytes& a, const Bytes& b, size_t element_size) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i / element_size);
  }
  return -1;
}

}  // namespace tidegate::testing

// In a test body: skips when `transport` cannot run here (with the reason), fails when it
// should connect `ranks` ranks and does not.
#define TIDEGATE_REQUIRE_TRANSPORT(transport, ranks)                                          \
  do {                                                                                        \
    const ::tidegate::Status ready_ = ::tidegate::testing::transport_ready(transport, ranks); \
    if (ready_.code() == TIDEGATE_ERR_UNSUPPORTED) GTEST_SKIP() << ready_.message();          \
    ASSERT_TRUE(ready_.is_ok()) << ready_.to_string();                                        \
  } while (0)

// Instantiates `fixture` with cases(transport) for the loopback and every real transport.
#define TIDEGATE_MATRIX_INSTANTIATE(fixture, cases, name)                                   \
  INSTANTIATE_TEST_SUITE_P(loopback, fixture, ::testing::ValuesIn(cases(kLoopback)), name); \
  INSTANTIATE_TEST_SUITE_P(tcp, fixture, ::testing::ValuesIn(cases("tcp")), name);          \
  INSTANTIATE_TEST_SUITE_P(ucx, fixture, ::testing::ValuesIn(cases("ucx")), name);          \
  GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(fixture)
