// Allreduce (every algorithm) and reduce-scatter over transports {loopback, tcp, ucx} x ranks
// {1..5} x sizes {0, 1, 7, 1023, 2^20+3} x dtypes x ops, in place and out of place: values
// against the reference and bitwise identity across ranks.
#include <cstring>
#include <tuple>

#include "test_cases.h"

namespace tidegate::testing {
namespace {

struct AllreduceCase {
  std::string algorithm;
  int ranks;
  int64_t count;
  bool in_place;
  std::string transport = kLoopback;
};

void check_allreduce(const AllreduceCase& c, const Config& config, tidegate_dtype_t dtype,
                     tidegate_reduce_op_t op, const LoopbackOptions& loopback = {}) {
  const std::string what = c.transport + " " + c.algorithm + " " + describe(dtype, op) +
                           " P=" + std::to_string(c.ranks) + " N=" + std::to_string(c.count);
  std::vector<Bytes> inputs;
  for (int r = 0; r < c.ranks; ++r) inputs.push_back(make_input(dtype, op, r, c.count, 17));
  const Bytes expected = expected_reduction(dtype, op, inputs, c.count);
  std::vector<Bytes> outputs(inputs.size(), Bytes(expected.size(), 0xcd));
  if (c.in_place) outputs = inputs;

  run_expect_ok(
      c.ranks, config,
      [&](int rank) {
        CollectiveArgs args;
        args.kind = OpKind::kAllreduce;
        args.op_seq = 5;
        args.reduce_op = op;
        void* in = c.in_place ? outputs[rank].data() : inputs[rank].data();
        args.input = view(in, c.count, dtype);
        args.output = view(outputs[rank].data(), c.count, dtype);
        return args;
      },
      what, c.algorithm,
      [&] {
        RunOptions options = on(c.transport);
        options.loopback = loopback;
        return options;
      }());

  const size_t element = dtype_size(dtype);
  ASSERT_EQ(first_difference(outputs[0], expected, element), -1) << what << ": wrong value";
  for (int r = 1; r < c.ranks; ++r) {
    ASSERT_TRUE(outputs[r] == outputs[0])  // bitwise: std::vector compares bytes
        << what << ": rank " << r << " differs from rank 0";
  }
}

class AllreduceTest : public ::testing::TestWithParam<AllreduceCase> {};

TEST_P(AllreduceTest, MatchesReferenceOnEveryRank) {
  const AllreduceCase& c = GetParam();
  TIDEGATE_REQUIRE_TRANSPORT(c.transport, c.ranks);
  const Config config = make_config({{"TIDEGATE_ALGO", "allreduce=" + c.algorithm}});
  for (const auto& [dtype, op] : matrix_pairs(c.transport, c.count, c.in_place)) {
    check_allreduce(c, config, dtype, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

std::vector<AllreduceCase> allreduce_cases(const std::string& transport) {
  std::vector<AllreduceCase> cases;
  if (!matrix_has(transport)) return cases;
  for (const char* algorithm : {"ring", "recursive_doubling", "rabenseifner"}) {
    for (int ranks : world_sizes()) {
      for (int64_t count : element_counts()) {
        for (bool in_place : {false, true})
          cases.push_back({algorithm, ranks, count, in_place, transport});
      }
    }
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<AllreduceCase>& info) {
  const AllreduceCase& c = info.param;
  return c.algorithm + "_P" + std::to_string(c.ranks) + "_N" + std::to_string(c.count) +
         (c.in_place ? "_inplace" : "_outofplace");
}

TIDEGATE_MATRIX_INSTANTIATE(AllreduceTest, allreduce_cases, case_name);

// Small segments make every ring step a pipeline of many segments, and the private partial
// buffer of a standalone reduce-scatter is reused across steps.
TEST(AllreducePipeline, ManySegmentsPerStep) {
  const Config config =
      make_config({{"TIDEGATE_ALGO", "allreduce=ring"}, {"TIDEGATE_SEGMENT_BYTES", "4096"}});
  for (int ranks : world_sizes()) {
    for (tidegate_dtype_t dtype : {TIDEGATE_FLOAT32, TIDEGATE_FLOAT16, TIDEGATE_INT64}) {
      check_allreduce({"ring", ranks, 100003, false}, config, dtype, TIDEGATE_SUM);
      check_allreduce({"ring", ranks, 100003, true}, config, dtype, TIDEGATE_MAX);
    }
  }
}

// Rabenseifner posts every halving and doubling receive at once where the transport allows it
// (receives_ahead), and round by round where it does not: both must give the reference's bits,
// on up to three halving rounds (8 ranks), with a fold (6, 7), counts smaller than the number
// of blocks, AVG (the owner finalises its block between the phases) and in place, on a
// rendezvous transport (a send completes only when its receive matched) and an eager one.
TEST(AllreduceRabenseifner, ReceivesAheadAndRoundByRoundGiveTheSameBits) {
  const Config config = make_config({{"TIDEGATE_ALGO", "allreduce=rabenseifner"}});
  for (bool ahead : {true, false}) {
    for (size_t eager : {size_t{0}, size_t{1} << 20}) {
      LoopbackOptions loopback;
      loopback.receives_ahead = ahead;
      loopback.eager_limit_bytes = eager;
      for (int ranks : {2, 4, 6, 7, 8}) {
        for (int64_t count : {int64_t{0}, int64_t{3}, int64_t{1023}, int64_t{100003}}) {
          for (bool in_place : {false, true}) {
            const AllreduceCase c{"rabenseifner", ranks, count, in_place};
            check_allreduce(c, config, TIDEGATE_FLOAT32, TIDEGATE_SUM, loopback);
            check_allreduce(c, config, TIDEGATE_FLOAT64, TIDEGATE_AVG, loopback);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// With NaN payloads, infinities and signed zeros the result depends on operand order; the
// canonical order (lower group first) must still give every rank the same bits.
TEST(AllreduceIdentity, SpecialValuesGiveIdenticalBitsOnEveryRank) {
  for (const char* algorithm : {"ring", "recursive_doubling", "rabenseifner"}) {
    const Config config = make_config({{"TIDEGATE_ALGO", std::string("allreduce=") + algorithm}});
    for (int ranks : {2, 3, 4, 5}) {
      for (tidegate_dtype_t dtype :
           {TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16, TIDEGATE_BFLOAT16}) {
        for (tidegate_reduce_op_t op : all_ops()) {
          const int64_t count = 1023;
          std::vector<Bytes> buffers;
          for (int r = 0; r < ranks; ++r)
            buffers.push_back(make_special_input(dtype, count, 50 + r));
          const std::string what =
              std::string(algorithm) + " " + describe(dtype, op) + " P=" + std::to_string(ranks);
          run_expect_ok(
              ranks, config,
              [&](int rank) {
                CollectiveArgs args;
                args.kind = OpKind::kAllreduce;
                args.reduce_op = op;
                args.input = args.output = view(buffers[rank].data(), count, dtype);
                return args;
              },
              what, algorithm);
          for (int r = 1; r < ranks; ++r) {
            ASSERT_EQ(buffers[r], buffers[0]) << what << ": rank " << r << " differs";
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------

void check_reduce_scatter(int ranks, int64_t count, const Config& config, tidegate_dtype_t dtype,
                          tidegate_reduce_op_t op, const std::string& transport = kLoopback) {
  const std::string what = transport + " reduce_scatter " + describe(dtype, op) +
                           " P=" + std::to_string(ranks) + " N=" + std::to_string(count);
  std::vector<Bytes> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(make_input(dtype, op, r, count, 23));
  const Bytes expected = expected_reduction(dtype, op, inputs, count);
  const size_t element = dtype_size(dtype);
  std::vector<Bytes> outputs;
  std::vector<int64_t> offsets, lengths;
  for (int r = 0; r < ranks; ++r) {
    int64_t offset = 0, length = 0;
    block_range(count, ranks, r, &offset, &length);
    offsets.push_back(offset);
    lengths.push_back(length);
    outputs.emplace_back(static_cast<size_t>(length) * element, 0xcd);
  }
  run_expect_ok(
      ranks, config,
      [&](int rank) {
        CollectiveArgs args;
        args.kind = OpKind::kReduceScatter;
        args.op_seq = 9;
        args.reduce_op = op;
        args.input = view(inputs[rank].data(), count, dtype);
        args.output = view(outputs[rank].data(), lengths[rank], dtype);
        return args;
      },
      what, "ring", on(transport));
  for (int r = 0; r < ranks; ++r) {
    const Bytes block(expected.begin() + offsets[r] * static_cast<int64_t>(element),
                      expected.begin() + (offsets[r] + lengths[r]) * static_cast<int64_t>(element));
    ASSERT_EQ(first_difference(outputs[r], block, element), -1) << what << ": rank " << r;
  }
}

class ReduceScatterTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ReduceScatterTest, EachRankGetsItsReducedBlock) {
  const auto [transport, ranks, count] = GetParam();
  TIDEGATE_REQUIRE_TRANSPORT(transport, ranks);
  const Config config;
  for (const auto& [dtype, op] : matrix_pairs(transport, count, false)) {
    check_reduce_scatter(ranks, count, config, dtype, op, transport);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TIDEGATE_MATRIX_INSTANTIATE(ReduceScatterTest, size_cases, size_case_name);

TEST(ReduceScatterPipeline, ManySegmentsReuseThePartialBuffer) {
  const Config config = make_config({{"TIDEGATE_SEGMENT_BYTES", "4096"}});
  for (int ranks : world_sizes()) {
    check_reduce_scatter(ranks, 100003, config, TIDEGATE_FLOAT32, TIDEGATE_SUM);
    check_reduce_scatter(ranks, 50001, config, TIDEGATE_BFLOAT16, TIDEGATE_AVG);
  }
}

}  // namespace
}  // namespace tidegate::testing
