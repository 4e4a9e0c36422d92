// Choosing and building tasks: the algorithm table's rows, the size rule's thresholds,
// TIDEGATE_ALGO overrides (and the CONFIG error for names a collective does not have), and the
// local argument checks.
#include <algorithm>
#include <set>

#include "collectives/algorithm_table.h"
#include "select/size_rule.h"
#include "test_cases.h"

namespace tidegate::testing {
namespace {

class NullTransport : public Transport {
 public:
  const char* name() const override { return "null"; }
  TransportCapabilities capabilities() const override { return {}; }
  Status isend(int, uint32_t, const WireHeader&, const void*, size_t, Handle*) override {
    return internal_error("unused");
  }
  Status irecv(int, uint32_t, const WireHeader&, void*, size_t, Handle*) override {
    return internal_error("unused");
  }
  Status test(Handle, bool*, size_t*) override { return internal_error("unused"); }
  Status progress(Milliseconds, bool*) override { return Status::ok(); }
  void wake() override {}
  void abort(const Status&) override {}
  Status close(Deadline) override { return Status::ok(); }
};

struct Fixture {
  NullTransport transport;
  Config config;
  std::vector<float> data = std::vector<float>(1 << 20);
  TaskContext context() {
    TaskContext c;
    c.transport = &transport;
    c.rank = 1;
    c.size = 4;
    c.config = &config;
    return c;
  }
  std::string rule(const CollectiveArgs& args) const {
    const AlgorithmRow* row = size_rule_algorithm(config, args);
    return row == nullptr ? "(none)" : row->name;
  }
  CollectiveArgs allreduce(int64_t count) {
    CollectiveArgs args;
    args.kind = OpKind::kAllreduce;
    args.input = args.output = view(data.data(), count, TIDEGATE_FLOAT32);
    return args;
  }
};

TEST(SizeRule, AllreduceThresholdsFollowTheConfig) {
  Fixture f;
  // Defaults: recursive doubling up to 16 KiB, the ring from 1 MiB, Rabenseifner between.
  EXPECT_EQ(f.rule(f.allreduce(0)), "recursive_doubling");
  EXPECT_EQ(f.rule(f.allreduce(4096)), "recursive_doubling");
  EXPECT_EQ(f.rule(f.allreduce(4097)), "rabenseifner");
  EXPECT_EQ(f.rule(f.allreduce(262143)), "rabenseifner");
  EXPECT_EQ(f.rule(f.allreduce(262144)), "ring");
  f.config = make_config(
      {{"TIDEGATE_ALLREDUCE_RD_MAX_BYTES", "0"}, {"TIDEGATE_ALLREDUCE_RING_MIN_BYTES", "0"}});
  EXPECT_EQ(f.rule(f.allreduce(1)), "ring");
}

TEST(SizeRule, OtherCollectivesUseTheirOwnAlgorithmFirst) {
  Fixture f;
  CollectiveArgs args;
  // The rule's choice is tidegate's own algorithm, listed first; allreduce, allgather and
  // reduce_scatter also list "native" (a transport's MPI/NCCL collective), which only the plan
  // offers where a transport has it.
  const std::pair<OpKind, const char*> expected[] = {
      {OpKind::kReduceScatter, "ring"},    {OpKind::kAllgather, "ring"},
      {OpKind::kAllgatherv, "ring"},       {OpKind::kBroadcast, "binomial"},
      {OpKind::kBarrier, "dissemination"}, {OpKind::kAlltoallv, "pairwise"}};
  for (const auto& [kind, name] : expected) {
    args.kind = kind;
    EXPECT_EQ(f.rule(args), name) << op_kind_name(kind);
    const bool has_native = kind == OpKind::kReduceScatter || kind == OpKind::kAllgather;
    ASSERT_EQ(algorithm_names(kind).size(), has_native ? 2u : 1u) << op_kind_name(kind);
    EXPECT_STREQ(algorithm_names(kind)[0], name);
    if (has_native) {
      EXPECT_STREQ(algorithm_names(kind)[1], "native");
    }
  }
  // Allreduce: three of our own, native, then the compressed rows (which take a codec).
  const auto allreduce = algorithms_for(OpKind::kAllreduce);
  const auto dense = std::count_if(allreduce.begin(), allreduce.end(),
                                   [](const AlgorithmRow* r) { return !r->compressed(); });
  EXPECT_EQ(dense, 4);
  EXPECT_EQ(algorithm_names(OpKind::kAllreduce).size(), allreduce.size());
}

TEST(AlgorithmTable, EveryRowIsCompleteAndFoundByItsName) {
  std::set<std::pair<int, std::string>> seen;
  for (const AlgorithmRow& row : algorithm_table()) {
    EXPECT_NE(row.make, nullptr) << row.name;
    EXPECT_NE(row.cost, nullptr) << row.name;
    EXPECT_TRUE(seen.insert({static_cast<int>(row.collective), row.name}).second)
        << "duplicate row " << op_kind_name(row.collective) << "/" << row.name;
    EXPECT_EQ(find_algorithm(row.collective, row.name), &row);
    // Native rows are the transports' own collectives; every other row reduces on the CPU.
    EXPECT_EQ(row.native(), std::string(row.name) == "native") << row.name;
    EXPECT_EQ(row.host_only(), !row.native()) << row.name;
  }
  EXPECT_EQ(find_algorithm(OpKind::kBarrier, "ring"), nullptr);
  EXPECT_EQ(find_algorithm(OpKind::kAllreduce, "tree"), nullptr);
  // The identity check prices and runs like a dissemination barrier but is no plan candidate.
  EXPECT_EQ(find_algorithm(OpKind::kInternal, "identity_check"), nullptr);
  CostTerms terms;
  terms.alpha = 10;
  EXPECT_DOUBLE_EQ(identity_check_algorithm().cost(terms, 0, 5), 30.0);  // ceil(log2 5) = 3
}

TEST(AlgorithmTable, CostFormulasPriceTheirOwnShape) {
  CostTerms t;
  t.alpha = 5;
  t.beta = 0.01;
  t.gamma = 0.002;
  const double n = 1 << 20;
  // A reduction needs the local throughput: unknown gamma means no price.
  CostTerms unknown = t;
  unknown.gamma = -1;
  for (const AlgorithmRow* row : algorithms_for(OpKind::kAllreduce)) {
    if (row->native()) continue;  // priced from the transport's own figures (below)
    if (row->compressed()) continue;  // priced with codec figures (select/codec_plan_test.cc)
    EXPECT_GT(row->cost(t, n, 4), 0) << row->name;
    EXPECT_LT(row->cost(unknown, n, 4), 0) << row->name;
  }
  // Ring: 2 (P-1) latencies and 2 (P-1)/P of the vector, the reduction hidden behind the wire.
  const AlgorithmRow* ring = find_algorithm(OpKind::kAllreduce, "ring");
  EXPECT_DOUBLE_EQ(ring->cost(t, n, 4), 6 * 5 + 2 * 0.75 * n * 0.01);
  // An unmeasured native collective is charged our best plus one latency.
  CostTerms native = t;
  native.own_best = 100;
  EXPECT_DOUBLE_EQ(find_algorithm(OpKind::kAllreduce, "native")->cost(native, n, 4), 105);
}

TEST(ForcedAlgorithm, OverridesTheRule) {
  Fixture f;
  f.config = make_config({{"TIDEGATE_ALGO", "allreduce=ring,broadcast=binomial"}});
  std::unique_ptr<CollectiveTask> task;
  ASSERT_TRUE(make_collective_task(f.context(), f.allreduce(3), &task).is_ok());
  EXPECT_STREQ(task->algorithm(), "ring");
  f.config = make_config({{"TIDEGATE_ALGO", "allreduce=rabenseifner"}});
  ASSERT_TRUE(make_collective_task(f.context(), f.allreduce(1 << 20), &task).is_ok());
  EXPECT_STREQ(task->algorithm(), "rabenseifner");
}

TEST(ForcedAlgorithm, UnknownNameIsAConfigErrorListingValidNames) {
  Fixture f;
  f.config = make_config({{"TIDEGATE_ALGO", "allreduce=tree"}});
  std::unique_ptr<CollectiveTask> task;
  const Status status = make_collective_task(f.context(), f.allreduce(3), &task);
  EXPECT_EQ(status.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(status.message().find("allreduce=tree"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("ring, recursive_doubling, rabenseifner"), std::string::npos)
      << status.message();
  // A name valid for another collective is still wrong for this one.
  f.config = make_config({{"TIDEGATE_ALGO", "barrier=ring"}});
  CollectiveArgs barrier;
  barrier.kind = OpKind::kBarrier;
  EXPECT_EQ(make_collective_task(f.context(), barrier, &task).code(), TIDEGATE_ERR_CONFIG);
}

TEST(LocalChecks, BadArgumentsAreRejectedBeforeAnyMessage) {
  Fixture f;
  std::unique_ptr<CollectiveTask> task;
  CollectiveArgs args = f.allreduce(10);
  args.output.memory = TIDEGATE_MEMORY_CUDA;
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_UNSUPPORTED);

  args = f.allreduce(10);
  args.kind = OpKind::kReduceScatter;
  args.output.count = 2;  // rank 1 of 4 owns 3 of 10 elements
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  args.output.count = 3;
  EXPECT_TRUE(make_collective_task(f.context(), args, &task).is_ok());

  args = f.allreduce(10);
  args.kind = OpKind::kAllgather;
  args.output.count = 39;
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);

  args = f.allreduce(10);
  args.kind = OpKind::kAllgatherv;
  args.counts = {1, 10, 3};  // one entry short
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);

  args = f.allreduce(10);
  args.kind = OpKind::kBroadcast;
  args.root = 4;
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);

  args = f.allreduce(10);
  args.kind = OpKind::kAlltoallv;
  args.send_counts = args.recv_counts = {2, 2, 2, 2};
  args.send_offsets = {0, 2, 4, 9};  // 9 + 2 > 10
  args.recv_offsets = {0, 2, 4, 6};
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  args.send_offsets = {0, 2, 4, 6};
  EXPECT_TRUE(make_collective_task(f.context(), args, &task).is_ok());

  args = f.allreduce(10);
  args.output.dtype = TIDEGATE_FLOAT64;
  EXPECT_EQ(make_collective_task(f.context(), args, &task).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tidegate::testing
