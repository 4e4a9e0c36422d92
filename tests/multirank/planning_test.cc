// The measured plan through the whole stack: communicators under TIDEGATE_TRANSPORT=auto probe
// their transports and build one plan on every rank; online re-planning rounds keep every rank
// on the same choices (a divergence would end in a MISMATCH or a wrong sum, which the checks
// here catch); TIDEGATE_TUNE reaches the plan; a malformed TUNE fails creation on every rank
// with an error that quotes it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "api/c_api_internal.h"
#include "select/probe_cache.h"
#include "thread_world.h"

namespace tidegate::testing {
namespace {

class ScopedEnv {
 public:
  using Vars = std::vector<std::pair<std::string, std::string>>;
  explicit ScopedEnv(Vars vars) : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

const Communicator& impl(tidegate_comm_t comm) { return *comm->impl; }

TEST(Planning, EveryRankHoldsTheSameProbeAndPlan) {
  ScopedEnv env(ScopedEnv::Vars{{"TIDEGATE_PROBE_BUDGET_MS", "200"}});
  ThreadWorld world(3);
  const std::string profile = impl(world.comm(0)).probe_profile().to_text();
  const std::string plan = impl(world.comm(0)).planner().plan_json();
  EXPECT_EQ(impl(world.comm(0)).probe_profile().source, "measured");
  for (int r = 1; r < world.size(); ++r) {
    EXPECT_EQ(impl(world.comm(r)).probe_profile().to_text(), profile) << "rank " << r;
    EXPECT_EQ(impl(world.comm(r)).planner().plan_json(), plan) << "rank " << r;
  }
  for (const TransportFigures& f : impl(world.comm(0)).probe_profile().transports) {
    EXPECT_GT(f.alpha_us, 0) << f.transport;
    EXPECT_GT(f.bandwidth_GBps, 0) << f.transport;
  }
}

// Re-planning every 3 ops, from a cached profile that promises an absurdly fast link (so every
// measurement is far slower than predicted and the planner keeps exploring and switching):
// every op must still be right and identical on every rank, and the ranks must end on the same
// plan.
TEST(Planning, OnlineReplanningKeepsRanksInStep) {
  char dir[] = "/tmp/tidegate-planning-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string cache = std::string(dir) + "/profile";
  ProbeProfile optimistic;
  optimistic.size = 3;
  optimistic.reduce_GBps = 1000;
  optimistic.source = "measured";
  TransportFigures tcp;
  tcp.transport = "tcp";
  tcp.alpha_us = 0.01;
  tcp.bandwidth_GBps = 1000;
  optimistic.transports.push_back(tcp);
  ASSERT_TRUE(save_probe_cache(cache, optimistic).is_ok());
  ScopedEnv env({{"TIDEGATE_TRANSPORT", "tcp"},
                 {"TIDEGATE_PROBE_CACHE", cache},
                 {"TIDEGATE_REPLAN_INTERVAL", "3"}});
  ThreadWorld world(3);
  const int64_t counts[] = {7, 1000, 5000, 70000};
  std::vector<std::vector<uint64_t>> hashes(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    for (int op = 0; op < 120; ++op) {
      const int64_t count = counts[op % 4];
      std::vector<double> data(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) data[i] = static_cast<double>((i + op) % 13 + rank);
      tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, TIDEGATE_FLOAT64);
      ASSERT_EQ(tidegate_allreduce(comm, &t, &t, TIDEGATE_SUM), TIDEGATE_OK)
          << tidegate_last_error();
      uint64_t hash = 1469598103934665603ull;
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[i], 3.0 * ((i + op) % 13) + 3.0) << "op " << op << " element " << i;
        uint64_t bits = 0;
        std::memcpy(&bits, &data[i], sizeof bits);
        hash = (hash ^ bits) * 1099511628211ull;
      }
      hashes[rank].push_back(hash);
    }
  });
  EXPECT_EQ(hashes[0], hashes[1]);
  EXPECT_EQ(hashes[0], hashes[2]);
  EXPECT_GT(impl(world.comm(0)).planner().replans(), 0)
      << impl(world.comm(0)).planner().plan_table();
  EXPECT_EQ(impl(world.comm(0)).probe_profile().source, "cache:" + cache);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(impl(world.comm(r)).planner().plan_table(),
              impl(world.comm(0)).planner().plan_table());
    EXPECT_EQ(impl(world.comm(r)).planner().replans(), impl(world.comm(0)).planner().replans());
  }
  ::unlink(cache.c_str());
  ::rmdir(dir);
}

TEST(Planning, TuneAndForcedTransportReachThePlan) {
  ScopedEnv env({{"TIDEGATE_TRANSPORT", "tcp"},
                 {"TIDEGATE_PROBE_BUDGET_MS", "100"},
                 {"TIDEGATE_TUNE", "allreduce:0-inf:@ring#broadcast:host:tcp"}});
  ThreadWorld world(2);
  EXPECT_EQ(impl(world.comm(0)).transport_names(), "tcp");
  for (int64_t count : {int64_t{1}, int64_t{1} << 10, int64_t{1} << 24}) {
    CollectiveArgs args;
    args.kind = OpKind::kAllreduce;
    args.input.count = args.output.count = count;
    EXPECT_EQ(impl(world.comm(1)).planned_choice_for(args), "tcp/ring") << count;
  }
}

TEST(Planning, MalformedTuneFailsCreationOnEveryRankNamingTheRule) {
  ScopedEnv env({{"TIDEGATE_PROBE", "off"}, {"TIDEGATE_TUNE", "allreduce:64K-1K:@ring"}});
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  std::vector<tidegate_status_t> results(2);
  std::vector<std::string> messages(2);
  std::vector<tidegate_comm_t> comms(2, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      results[r] = tidegate_comm_create(r, 2, &callbacks, &comms[r]);
      if (results[r] != TIDEGATE_OK) messages[r] = tidegate_last_error();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], TIDEGATE_ERR_CONFIG) << messages[r];
    EXPECT_NE(messages[r].find("allreduce:64K-1K"), std::string::npos) << messages[r];
    if (comms[r] != nullptr) tidegate_comm_destroy(comms[r]);
  }
}

TEST(Planning, ProbeOffReproducesTheSizeRule) {
  ScopedEnv env(ScopedEnv::Vars{{"TIDEGATE_PROBE", "off"}});
  ThreadWorld world(2);
  EXPECT_EQ(impl(world.comm(0)).probe_profile().source, "defaults");
  CollectiveArgs args;
  args.kind = OpKind::kAllreduce;
  args.input.dtype = args.output.dtype = TIDEGATE_FLOAT32;
  const std::pair<int64_t, const char*> expected[] = {
      {1024, "recursive_doubling"}, {64 * 1024, "rabenseifner"}, {4 << 20, "ring"}};
  for (const auto& [count, algorithm] : expected) {
    args.input.count = args.output.count = count / 4;
    const std::string choice = impl(world.comm(0)).planned_choice_for(args);
    EXPECT_EQ(choice.substr(choice.find('/') + 1), algorithm) << count << " B: " << choice;
  }
}

}  // namespace
}  // namespace tidegate::testing
