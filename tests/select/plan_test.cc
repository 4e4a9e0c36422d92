// The plan: model-ranked choices per (collective, memory, size range), TUNE and TIDEGATE_ALGO
// restrictions, the size-rule mode, coverage and determinism.
#include "select/plan.h"

#include <gtest/gtest.h>

namespace tidegate {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
constexpr OpKind kKinds[] = {OpKind::kAllreduce,  OpKind::kReduceScatter, OpKind::kAllgather,
                             OpKind::kAllgatherv, OpKind::kBroadcast,     OpKind::kBarrier,
                             OpKind::kAlltoallv};

TransportFigures figures(const std::string& name, double alpha_us, double bandwidth_GBps) {
  TransportFigures f;
  f.transport = name;
  f.alpha_us = alpha_us;
  f.bandwidth_GBps = bandwidth_GBps;
  return f;
}

TransportOffer offer(const std::string& name, bool host = true, bool cuda = false,
                     bool native = false) {
  TransportOffer o;
  o.name = name;
  o.capabilities.host_memory = host;
  o.capabilities.cuda_memory = cuda;
  o.capabilities.native_allreduce = native;
  o.capabilities.native_allgather = native;
  o.capabilities.native_reduce_scatter = native;
  return o;
}

// P ranks on one tcp link: alpha 50 us, 1 GB/s, 10 GB/s reduction.
PlanInputs tcp_inputs(int size = 8, double alpha_us = 50) {
  PlanInputs in;
  in.size = size;
  in.profile.size = size;
  in.profile.reduce_GBps = 10;
  in.profile.transports = {figures("tcp", alpha_us, 1)};
  in.transports = {offer("tcp")};
  return in;
}

Plan build_ok(const PlanInputs& in) {
  Plan plan;
  Status st = Plan::build(in, &plan);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return plan;
}

std::string top(const Plan& plan, int64_t bytes, OpKind kind = OpKind::kAllreduce,
                tidegate_memory_t memory = TIDEGATE_MEMORY_HOST) {
  const PlanEntry* e = plan.find(kind, memory, bytes);
  if (e == nullptr) return "none";
  return e->ranked.front().transport + "/" + e->ranked.front().algorithm_name();
}

Status build_error(const PlanInputs& in) {
  Plan plan;
  return Plan::build(in, &plan);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Plan, RankingFlipsWithSize) {
  Plan plan = build_ok(tcp_inputs());
  EXPECT_EQ(top(plan, 0), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, 1 * kKiB), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, 256 * kKiB), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, 256 * kMiB), "tcp/ring");
  EXPECT_EQ(top(plan, INT64_MAX), "tcp/ring");
  EXPECT_EQ(top(plan, 1 * kMiB, OpKind::kBroadcast), "tcp/binomial");
  const PlanEntry* e = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 256 * kMiB);
  ASSERT_GE(e->ranked.size(), 2u);
  EXPECT_LE(e->ranked.size(), 3u);
  // Predictions within one 5% step are ties, settled by table order (ring before Rabenseifner).
  EXPECT_LE(e->ranked[0].predicted_us, e->ranked[1].predicted_us * 1.05);
  EXPECT_FALSE(e->tuned);
}

// Two transports the probe cannot tell apart (2% apart): the first one in the communicator's
// order wins at every size, so noise in the figures does not flip the transport.
TEST(Plan, NearEqualTransportsTieToTheFirst) {
  PlanInputs in = tcp_inputs();
  TransportFigures ucx = in.profile.transports.front();
  ucx.transport = "ucx";
  ucx.bandwidth_GBps *= 1.02;
  ucx.alpha_us *= 0.98;
  in.profile.transports.push_back(ucx);
  TransportOffer second = in.transports.front();
  second.name = "ucx";
  in.transports.push_back(second);
  Plan plan = build_ok(in);
  for (int64_t bytes : {int64_t{0}, 4 * kKiB, 256 * kKiB, 16 * kMiB, 1024 * kMiB}) {
    EXPECT_EQ(top(plan, bytes).substr(0, 4), "tcp/") << bytes;
  }
}

// Smallest size from which the plan picks the ring for allreduce.
int64_t ring_from(const Plan& plan) {
  const PlanEntry* last = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, INT64_MAX);
  EXPECT_EQ(last->ranked.front().algorithm_name(), "ring");
  int64_t from = last->min_bytes;
  while (from > 0) {
    const PlanEntry* e = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, from - 1);
    if (e->ranked.front().algorithm_name() != "ring") break;
    from = e->min_bytes;
  }
  return from;
}

TEST(Plan, HighLatencyMovesTheRingCrossoverUp) {
  // Rabenseifner saves 2(P-1) - 2 log2 P latencies against the ring's hidden reduction, so the
  // size where the ring takes over grows with alpha.
  int64_t low_latency = ring_from(build_ok(tcp_inputs(8, 5)));
  int64_t high_latency = ring_from(build_ok(tcp_inputs(8, 500)));
  EXPECT_GE(high_latency, 64 * low_latency);
}

TEST(Plan, MeasuredNativeWinsWhenItIsFaster) {
  PlanInputs in = tcp_inputs();
  in.transports.push_back(offer("mpi", true, false, true));
  TransportFigures mpi = figures("mpi", 50, 1);
  in.profile.transports.push_back(mpi);
  Plan unmeasured = build_ok(in);
  for (const PlanEntry& e : unmeasured.entries())
    EXPECT_NE(e.ranked.front().algorithm_name(), "native");

  in.profile.transports.back().native_alpha_us = 5;
  in.profile.transports.back().native_bandwidth_GBps = 10;
  Plan measured = build_ok(in);
  EXPECT_EQ(top(measured, 64 * kMiB), "mpi/native");
  EXPECT_EQ(top(measured, 64 * kMiB, OpKind::kAllgather), "mpi/native");
  EXPECT_EQ(top(measured, 64 * kMiB, OpKind::kAllgatherv), "tcp/ring");  // no native allgatherv
  for (const PlanEntry& e : measured.entries()) {
    for (const PlanChoice& c : e.ranked) {
      if (c.algorithm_name() == "native") {
        EXPECT_EQ(c.transport, "mpi");  // tcp offers none
      }
    }
  }
}

// A choice off the first transport (or native) pays the engine's identity check on the first
// transport first: ceil(log2 P) latencies of it. A second transport whose own latency is a
// little lower does not win small messages, and the price it carries includes the check.
TEST(Plan, IdentityCheckIsPricedOffTheFirstTransport) {
  PlanInputs in = tcp_inputs(8, 50);
  in.transports.push_back(offer("ucx"));
  in.profile.transports.push_back(figures("ucx", 35, 1));
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 1 * kKiB), "tcp/recursive_doubling");
  const PlanEntry* e = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 1 * kKiB);
  const PlanChoice* tcp = nullptr;
  const PlanChoice* ucx = nullptr;
  for (const PlanChoice& c : e->ranked) {
    if (c.algorithm_name() != "recursive_doubling") continue;
    (c.transport == "tcp" ? tcp : ucx) = &c;
  }
  ASSERT_NE(tcp, nullptr);
  ASSERT_NE(ucx, nullptr);
  // Both run 3 latency-bound steps; ucx adds 3 tcp latencies for the check.
  EXPECT_NEAR(ucx->predicted_us - tcp->predicted_us, (3 * 35 + 3 * 50) - 3 * 50, 10.0);

  // Where bandwidth dominates, a faster second transport wins despite the check.
  in.profile.transports.back().bandwidth_GBps = 10;
  EXPECT_EQ(top(build_ok(in), 64 * kMiB).substr(0, 4), "ucx/");
}

TEST(Plan, CorrectionsChangeTheChoice) {
  PlanInputs in = tcp_inputs();
  EXPECT_EQ(top(build_ok(in), 1 << 30), "tcp/ring");
  in.corrections[{"tcp", "ring"}] = 3.0;  // the ring ran three times slower than predicted
  EXPECT_EQ(top(build_ok(in), 1 << 30), "tcp/rabenseifner");
}

TEST(Plan, TieBreaksFollowTransportOrder) {
  PlanInputs in = tcp_inputs();
  in.transports = {offer("ucx"), offer("tcp")};
  in.profile.transports = {figures("tcp", 50, 1), figures("ucx", 50, 1)};
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 4 * kKiB), "ucx/recursive_doubling");
  // Where bandwidth dominates, the identity check that a choice off the first transport pays
  // (3 latencies) is far inside the 5% tie margin: the same algorithms on tcp tie, and rank
  // after the first transport's (ring and Rabenseifner also tie there, in table order).
  const PlanEntry* e = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 64 * kMiB);
  ASSERT_EQ(e->ranked.size(), 3u);
  EXPECT_EQ(e->ranked[0].transport + "/" + e->ranked[0].algorithm_name(), "ucx/ring");
  EXPECT_EQ(e->ranked[1].transport + "/" + e->ranked[1].algorithm_name(), "ucx/rabenseifner");
  EXPECT_EQ(e->ranked[2].transport + "/" + e->ranked[2].algorithm_name(), "tcp/ring");
}

TEST(Plan, TuneRangeSplitsEntriesAtItsBoundary) {
  PlanInputs in = tcp_inputs();
  ASSERT_TRUE(parse_tune("allreduce:0-100K:@ring", &in.tune).is_ok());
  Plan plan = build_ok(in);
  const PlanEntry* inside = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 100 * kKiB);
  const PlanEntry* after = plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 100 * kKiB + 1);
  EXPECT_EQ(inside->max_bytes, 100 * kKiB);
  EXPECT_EQ(after->min_bytes, 100 * kKiB + 1);
  EXPECT_TRUE(inside->tuned);
  EXPECT_FALSE(after->tuned);
  EXPECT_EQ(top(plan, 0), "tcp/ring");
  EXPECT_EQ(top(plan, 100 * kKiB), "tcp/ring");
  // Past the rule the model decides again (recursive doubling and Rabenseifner are within 5%
  // of each other there: a tie, settled by table order).
  EXPECT_EQ(top(plan, 100 * kKiB + 1), "tcp/recursive_doubling");
  for (const PlanChoice& c : inside->ranked) EXPECT_EQ(c.algorithm_name(), "ring");
  EXPECT_FALSE(plan.find(OpKind::kAllgather, TIDEGATE_MEMORY_HOST, 0)->tuned);
}

TEST(Plan, LaterTuneRulesWin) {
  PlanInputs in = tcp_inputs();
  ASSERT_TRUE(parse_tune("allreduce:@ring#allreduce:0-1K:@rabenseifner", &in.tune).is_ok());
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 512), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, 1025), "tcp/ring");
}

TEST(Plan, TidegateAlgoForcesEverySize) {
  PlanInputs in = tcp_inputs();
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_ALGO", "allreduce=rabenseifner").is_ok());
  in.config = &config;
  Plan plan = build_ok(in);
  for (const PlanEntry& e : plan.entries()) {
    if (e.kind != OpKind::kAllreduce) {
      EXPECT_FALSE(e.tuned);
      continue;
    }
    EXPECT_TRUE(e.tuned);
    EXPECT_EQ(e.ranked.front().algorithm_name(), "rabenseifner");
  }
  // A TUNE rule's own @algorithm replaces the forced one where it applies.
  ASSERT_TRUE(parse_tune("allreduce:1G-inf:@ring", &in.tune).is_ok());
  EXPECT_EQ(top(build_ok(in), 1 << 30), "tcp/ring");
  EXPECT_EQ(top(build_ok(in), 1), "tcp/rabenseifner");
}

TEST(Plan, InvalidForcedAlgorithmIsAConfigError) {
  PlanInputs in = tcp_inputs();
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_ALGO", "allreduce=bogus").is_ok());
  in.config = &config;
  Status st = build_error(in);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_TRUE(contains(st.message(), "TIDEGATE_ALGO forces allreduce=bogus")) << st.message();
  EXPECT_TRUE(contains(st.message(), "ring, recursive_doubling, rabenseifner")) << st.message();
}

TEST(Plan, UnknownTuneTransportIsAConfigError) {
  PlanInputs in = tcp_inputs();
  ASSERT_TRUE(parse_tune("allreduce:nccl:@ring", &in.tune).is_ok());
  Status st = build_error(in);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_TRUE(contains(st.message(), "rule 'allreduce:nccl:@ring' names transport 'nccl'"))
      << st.message();
  EXPECT_TRUE(contains(st.message(), "available: tcp")) << st.message();
}

TEST(Plan, TuneRuleLeavingNoChoiceIsAConfigError) {
  PlanInputs in = tcp_inputs();
  ASSERT_TRUE(parse_tune("allreduce:host:@pairwise", &in.tune).is_ok());
  Status st = build_error(in);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_TRUE(contains(st.message(), "'allreduce:host:@pairwise' leaves no choice"))
      << st.message();
  EXPECT_TRUE(contains(st.message(), "algorithms: ring, recursive_doubling, rabenseifner"))
      << st.message();

  ASSERT_TRUE(parse_tune("allreduce:@pairwise", &in.tune).is_ok());
  st = build_error(in);
  EXPECT_TRUE(contains(st.message(), "'allreduce:@pairwise' matches no choice")) << st.message();

  // 'all' restricts only the collectives that have the algorithm.
  ASSERT_TRUE(parse_tune("all:@ring", &in.tune).is_ok());
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 16), "tcp/ring");
  EXPECT_EQ(top(plan, 16, OpKind::kBroadcast), "tcp/binomial");
  EXPECT_FALSE(plan.find(OpKind::kBroadcast, TIDEGATE_MEMORY_HOST, 16)->tuned);
}

TEST(Plan, IdenticalInputsGiveIdenticalPlans) {
  PlanInputs in = tcp_inputs(6);
  in.transports.push_back(offer("mpi", true, false, true));
  in.profile.transports.push_back(figures("mpi", 3, 0.7));
  in.corrections[{"mpi", "ring"}] = 1.3;
  ASSERT_TRUE(parse_tune("allgather:1K-3M:mpi", &in.tune).is_ok());
  std::string first = build_ok(in).to_json();
  EXPECT_EQ(first, build_ok(in).to_json());
  EXPECT_EQ(build_ok(in).to_table(), build_ok(in).to_table());
  EXPECT_EQ(first.front(), '[');
  EXPECT_EQ(first.back(), ']');
  EXPECT_TRUE(contains(first, "\"max_bytes\":null")) << first;
  EXPECT_TRUE(contains(first, "\"collective\":\"allreduce\",\"memory\":\"host\",\"min_bytes\":0,"))
      << first;
}

// Every (kind, memory) that has entries has them sorted, contiguous, from 0 to INT64_MAX.
void expect_full_coverage(const Plan& plan, tidegate_memory_t memory) {
  for (OpKind kind : kKinds) {
    int64_t next = 0;
    bool done = false;
    for (const PlanEntry& e : plan.entries()) {
      if (e.kind != kind || e.memory != memory) continue;
      ASSERT_FALSE(done) << op_kind_name(kind) << " has an entry after INT64_MAX";
      EXPECT_EQ(e.min_bytes, next) << op_kind_name(kind);
      EXPECT_GE(e.max_bytes, e.min_bytes);
      EXPECT_FALSE(e.ranked.empty());
      EXPECT_EQ(plan.find(kind, memory, e.min_bytes), &e);
      EXPECT_EQ(plan.find(kind, memory, e.max_bytes), &e);
      done = e.max_bytes == INT64_MAX;
      next = done ? 0 : e.max_bytes + 1;
    }
    EXPECT_TRUE(done) << op_kind_name(kind) << " does not reach INT64_MAX";
  }
}

TEST(Plan, FindCoversEverySizeWithoutGaps) {
  PlanInputs in = tcp_inputs(5);
  ASSERT_TRUE(parse_tune("allreduce:3-7:@ring#all:12345-99999", &in.tune).is_ok());
  Plan plan = build_ok(in);
  expect_full_coverage(plan, TIDEGATE_MEMORY_HOST);
  EXPECT_EQ(plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, -1), nullptr);
  EXPECT_EQ(plan.find(OpKind::kInternal, TIDEGATE_MEMORY_HOST, 0), nullptr);
}

TEST(Plan, CudaEntriesOnlyWhenATransportTakesCudaMemory) {
  PlanInputs in = tcp_inputs();
  Plan host_only = build_ok(in);
  EXPECT_EQ(host_only.find(OpKind::kAllreduce, TIDEGATE_MEMORY_CUDA, 0), nullptr);
  for (const PlanEntry& e : host_only.entries()) EXPECT_EQ(e.memory, TIDEGATE_MEMORY_HOST);

  in.transports.push_back(offer("nccl", false, true, true));
  in.profile.transports.push_back(figures("nccl", 10, 20));
  Plan both = build_ok(in);
  expect_full_coverage(both, TIDEGATE_MEMORY_HOST);
  expect_full_coverage(both, TIDEGATE_MEMORY_CUDA);
  for (const PlanEntry& e : both.entries()) {
    for (const PlanChoice& c : e.ranked) {
      EXPECT_EQ(c.transport, e.memory == TIDEGATE_MEMORY_CUDA ? "nccl" : "tcp");
    }
  }
}

TEST(Plan, SizeRuleReproducesTheThresholds) {
  PlanInputs in = tcp_inputs(4);
  in.transports.push_back(offer("ucx"));
  in.profile.transports.push_back(figures("ucx", 1, 100));  // better, but not first
  in.use_size_rule = true;
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_ALLREDUCE_RD_MAX_BYTES", "100000").is_ok());
  ASSERT_TRUE(config.set("TIDEGATE_ALLREDUCE_RING_MIN_BYTES", "3000000").is_ok());
  in.config = &config;
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 0), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, 100000), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, 100001), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, 2999999), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, 3000000), "tcp/ring");
  EXPECT_EQ(top(plan, INT64_MAX), "tcp/ring");
  EXPECT_EQ(top(plan, 64, OpKind::kBarrier), "tcp/dissemination");
  EXPECT_GT(plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 0)->ranked.front().predicted_us, 0);
  expect_full_coverage(plan, TIDEGATE_MEMORY_HOST);
}

TEST(Plan, SizeRuleWithDefaultFigures) {
  PlanInputs in;
  in.size = 8;
  in.profile = ProbeProfile::defaults(8, {"tcp", "mpi"});
  in.transports = {offer("tcp"), offer("mpi", true, false, true)};
  in.use_size_rule = true;
  Config config;
  in.config = &config;
  Plan plan = build_ok(in);
  int64_t rd_max = config.recursive_doubling_max_bytes();
  int64_t ring_min = config.ring_min_bytes();
  EXPECT_EQ(top(plan, rd_max), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, rd_max + 1), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, ring_min - 1), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, ring_min), "tcp/ring");
}

TEST(Plan, NoFiguresFallsBackToTheSizeRule) {
  PlanInputs in = tcp_inputs(4);
  in.profile.transports.clear();
  Plan plan = build_ok(in);
  EXPECT_EQ(top(plan, 16 * kKiB), "tcp/recursive_doubling");
  EXPECT_EQ(top(plan, 16 * kKiB + 1), "tcp/rabenseifner");
  EXPECT_EQ(top(plan, 1 * kMiB), "tcp/ring");
  EXPECT_EQ(plan.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, 0)->ranked.front().predicted_us, 0);
}

TEST(Plan, SingleRankAndBadInputs) {
  Plan single = build_ok(tcp_inputs(1));
  expect_full_coverage(single, TIDEGATE_MEMORY_HOST);
  PlanInputs none = tcp_inputs();
  none.transports.clear();
  EXPECT_EQ(build_error(none).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(build_error(tcp_inputs(0)).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
}

TEST(Plan, TableHasAHeaderAndOneLinePerEntry) {
  Plan plan = build_ok(tcp_inputs());
  std::string table = plan.to_table();
  size_t lines = 0;
  for (char c : table) lines += c == '\n';
  EXPECT_EQ(lines, plan.entries().size() + 1);
  EXPECT_TRUE(contains(table, "collective")) << table;
  EXPECT_TRUE(contains(table, "..inf")) << table;
  EXPECT_TRUE(contains(table, "tcp/ring")) << table;
}

}  // namespace
}  // namespace tidegate
