// What the wire headers buy: ranks that post different collectives (count, dtype, op, kind,
// per-pair counts) fail at their first message with a MISMATCH naming both ranks and the
// field, never a hang or a wrong sum; and collectives posted back to back on one channel
// match up in order, whether the transport completes sends eagerly or only when matched.
#include <cstring>

#include "collectives/algorithms.h"
#include "test_cases.h"

namespace tidegate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs one allreduce per rank with args_for(rank); returns the statuses.
std::vector<Status> run_allreduce_variant(int ranks, const std::string& algorithm,
                                          const std::function<void(int, CollectiveArgs*)>& tweak,
                                          std::vector<Bytes>* buffers) {
  const Config config = make_config({{"TIDEGATE_ALGO", "allreduce=" + algorithm}});
  buffers->assign(static_cast<size_t>(ranks), Bytes(8 * 2048, 0));
  return run_ranks(ranks, config, [&](const TaskContext& context) {
    CollectiveArgs args;
    args.kind = OpKind::kAllreduce;
    args.op_seq = 12;
    Bytes& buffer = (*buffers)[static_cast<size_t>(context.rank)];
    args.input = args.output = view(buffer.data(), 1024, TIDEGATE_FLOAT32);
    tweak(context.rank, &args);
    return run_collective(context, args, Deadline::after_ms(20000));
  });
}

// Every rank fails with MISMATCH; at least one (a receiver of `culprit`'s messages) names
// `culprit` and `field` itself, the others may report the abort that followed.
void expect_named_mismatch(const std::vector<Status>& results, int culprit,
                           const std::string& field, const std::string& what) {
  bool named = false;
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r].code(), TIDEGATE_ERR_MISMATCH)
        << what << " rank " << r << ": " << results[r].to_string();
    const std::string& message = results[r].message();
    if (contains(message, "rank " + std::to_string(culprit) + " posted") &&
        contains(message, "(field '" + field + "'") && contains(message, "op #12")) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << what << ": no rank named rank " << culprit << " and field " << field
                     << "; rank 0 said: " << results[0].to_string();
}

using MismatchCase = std::tuple<std::string, int>;  // algorithm, ranks

class MismatchTest : public ::testing::TestWithParam<MismatchCase> {};

std::string mismatch_case_name(const ::testing::TestParamInfo<MismatchCase>& info) {
  return std::get<0>(info.param) + "_P" + std::to_string(std::get<1>(info.param));
}

TEST_P(MismatchTest, CountDtypeOpAndKindMismatchesAreNamed) {
  const auto [algorithm, ranks] = GetParam();
  std::vector<Bytes> buffers;
  const int culprit = ranks - 1;
  expect_named_mismatch(run_allreduce_variant(
                            ranks, algorithm,
                            [&](int rank, CollectiveArgs* a) {
                              if (rank == culprit) a->input.count = a->output.count = 1023;
                            },
                            &buffers),
                        culprit, "count", algorithm + " count");
  expect_named_mismatch(run_allreduce_variant(
                            ranks, algorithm,
                            [&](int rank, CollectiveArgs* a) {
                              if (rank == culprit)
                                a->input.dtype = a->output.dtype = TIDEGATE_FLOAT64;
                            },
                            &buffers),
                        culprit, "dtype", algorithm + " dtype");
  expect_named_mismatch(run_allreduce_variant(
                            ranks, algorithm,
                            [&](int rank, CollectiveArgs* a) {
                              if (rank == culprit) a->reduce_op = TIDEGATE_MAX;
                            },
                            &buffers),
                        culprit, "reduce op", algorithm + " op");
  expect_named_mismatch(run_allreduce_variant(
                            ranks, algorithm,
                            [&](int rank, CollectiveArgs* a) {
                              if (rank == culprit) {
                                a->kind = OpKind::kAllgather;
                                a->input.count = 1024 / ranks;
                                a->output.count = a->input.count * ranks;
                              }
                            },
                            &buffers),
                        culprit, "op kind", algorithm + " kind");
}

INSTANTIATE_TEST_SUITE_P(Allreduce, MismatchTest,
                         ::testing::Combine(::testing::Values("ring", "recursive_doubling",
                                                              "rabenseifner"),
                                            ::testing::Values(2, 3, 5)),
                         mismatch_case_name);

TEST(AlltoallvMismatch, BothRanksOfThePairReportIt) {
  // Rank 0 sends 5 elements to rank 1, which expects 4. No abort, so each status is the rank's
  // own finding from the other's claim messages.
  const int ranks = 2;
  std::vector<Bytes> inputs(ranks, Bytes(64, 1)), outputs(ranks, Bytes(64, 0));
  RunOptions options;
  options.abort_on_error = false;
  const std::vector<Status> results = run_ranks(
      ranks, Config(),
      [&](const TaskContext& context) {
        CollectiveArgs args;
        args.kind = OpKind::kAlltoallv;
        args.op_seq = 12;
        args.input = view(inputs[context.rank].data(), 16, TIDEGATE_FLOAT32);
        args.output = view(outputs[context.rank].data(), 16, TIDEGATE_FLOAT32);
        args.send_counts = {4, 4};
        args.recv_counts = {4, 4};
        args.send_offsets = args.recv_offsets = {0, 8};
        if (context.rank == 0) args.send_counts[1] = 5;
        return run_collective(context, args, Deadline::after_ms(20000), nullptr, false);
      },
      options);
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), TIDEGATE_ERR_MISMATCH) << results[r].to_string();
    EXPECT_TRUE(contains(results[r].message(), "(field 'count'")) << results[r].message();
    EXPECT_TRUE(contains(results[r].message(), "rank 0 posted count=5")) << results[r].message();
    EXPECT_TRUE(contains(results[r].message(), "rank 1 posted count=4")) << results[r].message();
  }
}

TEST(BroadcastAndAllgathervMismatch, AreNamed) {
  std::vector<Bytes> buffers(3, Bytes(4096, 0));
  const std::vector<Status> broadcast = run_ranks(3, Config(), [&](const TaskContext& context) {
    CollectiveArgs args;
    args.kind = OpKind::kBroadcast;
    args.op_seq = 12;
    args.input = args.output =
        view(buffers[context.rank].data(), context.rank == 2 ? 99 : 100, TIDEGATE_FLOAT32);
    return run_collective(context, args, Deadline::after_ms(20000));
  });
  // Rank 2 receives the root's first segment and names it; ranks 0 and 1 may finish this
  // broadcast before the abort reaches them (their next collective would fail).
  EXPECT_EQ(broadcast[2].code(), TIDEGATE_ERR_MISMATCH) << broadcast[2].to_string();
  EXPECT_TRUE(contains(broadcast[2].message(), "rank 0 posted count=100"))
      << broadcast[2].message();
  EXPECT_TRUE(contains(broadcast[2].message(), "(field 'count'")) << broadcast[2].message();
  const std::vector<Status> gatherv = run_ranks(3, Config(), [&](const TaskContext& context) {
    CollectiveArgs args;
    args.kind = OpKind::kAllgatherv;
    args.op_seq = 12;
    // Same total, different split on rank 1.
    args.counts = context.rank == 1 ? std::vector<int64_t>{3, 2, 5} : std::vector<int64_t>{2, 3, 5};
    args.input = view(buffers[context.rank].data(), args.counts[context.rank], TIDEGATE_UINT8);
    args.output = view(buffers[context.rank].data() + 100, 10, TIDEGATE_UINT8);
    return run_collective(context, args, Deadline::after_ms(20000));
  });
  bool named = false;
  for (const Status& s : gatherv) {
    EXPECT_EQ(s.code(), TIDEGATE_ERR_MISMATCH) << s.to_string();
    named = named || contains(s.message(), "(field 'counts'");
  }
  EXPECT_TRUE(named);
}

// Eight different collectives back to back on one channel, on rendezvous and eager
// transports: each must match its own messages only.
void run_sequence(int ranks, const LoopbackOptions& loopback) {
  const int64_t count = 3001;
  std::vector<Bytes> inputs, ring, halving, doubling;
  for (int r = 0; r < ranks; ++r) {
    inputs.push_back(make_input(TIDEGATE_FLOAT32, TIDEGATE_SUM, r, count, 3));
    ring.push_back(Bytes(inputs[r].size()));
  }
  halving = doubling = ring;
  const Bytes expected = expected_reduction(TIDEGATE_FLOAT32, TIDEGATE_SUM, inputs, count);
  RunOptions options;
  options.loopback = loopback;
  const std::vector<Status> results = run_ranks(
      ranks, Config(),
      [&](const TaskContext& context) {
        const int r = context.rank;
        uint64_t seq = 0;
        auto allreduce = [&](const char* algorithm, Bytes& out) {
          Config config = make_config({{"TIDEGATE_ALGO", std::string("allreduce=") + algorithm}});
          TaskContext forced = context;
          forced.config = &config;
          CollectiveArgs args;
          args.kind = OpKind::kAllreduce;
          args.op_seq = ++seq;
          args.input = view(inputs[r].data(), count, TIDEGATE_FLOAT32);
          args.output = view(out.data(), count, TIDEGATE_FLOAT32);
          return run_collective(forced, args, Deadline::after_ms(30000));
        };
        TG_RETURN_IF_ERROR(allreduce("ring", ring[r]));
        CollectiveArgs barrier;
        barrier.kind = OpKind::kBarrier;
        barrier.op_seq = ++seq;
        TG_RETURN_IF_ERROR(run_collective(context, barrier, Deadline::after_ms(30000)));
        TG_RETURN_IF_ERROR(allreduce("rabenseifner", halving[r]));
        TG_RETURN_IF_ERROR(allreduce("recursive_doubling", doubling[r]));
        return Status::ok();
      },
      options);
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(results[r].is_ok()) << results[r].to_string();
    EXPECT_EQ(ring[r], expected) << "rank " << r;
    EXPECT_EQ(halving[r], expected) << "rank " << r;
    EXPECT_EQ(doubling[r], expected) << "rank " << r;
  }
}

TEST(Sequence, BackToBackCollectivesMatchInOrder) {
  for (int ranks : {2, 3, 5}) {
    run_sequence(ranks, LoopbackOptions{});
    run_sequence(ranks, LoopbackOptions{size_t{1} << 20});  // eager: sends finish at once
  }
}

}  // namespace
}  // namespace tidegate::testing
