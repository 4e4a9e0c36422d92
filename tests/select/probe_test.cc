// run_probe over real TCP transports between ranks that are threads of this process: every
// rank ends with the same profile, within the budget; probe off and the cache skip the wire.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "select/probe.h"
#include "select/probe_cache.h"
#include "tests/transport_tcp/tcp_test_util.h"

namespace tidegate {
namespace {

using tcp_testing::TcpWorld;

constexpr int64_t kBudgetMs = 200;
// Slack over the budget for what it does not bound: ranks meeting in the store, the reduction
// measurement, and four ranks sharing two cores in CI.
constexpr double kSlackMs = 800;

// Counts every call, to show that a probe used (or did not use) the store.
class CountingStore : public Store {
 public:
  explicit CountingStore(Store* inner) : inner_(inner) {}
  Status set(const std::string& key, const std::string& value) override {
    ++calls;
    return inner_->set(key, value);
  }
  Status get(const std::string& key, Deadline deadline, std::string* value) override {
    ++calls;
    return inner_->get(key, deadline, value);
  }
  std::atomic<int> calls{0};

 private:
  Store* inner_;
};

// A transport that must not be used: any call but name()/capabilities() is counted and fails.
class UntouchableTransport : public Transport {
 public:
  const char* name() const override { return "tcp"; }
  TransportCapabilities capabilities() const override { return {}; }
  Status isend(int, uint32_t, const WireHeader&, const void*, size_t, Handle*) override {
    return touched();
  }
  Status irecv(int, uint32_t, const WireHeader&, void*, size_t, Handle*) override {
    return touched();
  }
  Status test(Handle, bool*, size_t*) override { return touched(); }
  Status progress(Milliseconds, bool*) override { return touched(); }
  void wake() override {}
  void abort(const Status&) override {}
  Status close(Deadline) override { return Status::ok(); }
  std::atomic<int> calls{0};

 private:
  Status touched() {
    ++calls;
    return internal_error("the probe used a transport it must not touch");
  }
};

// Forwards to a real transport and claims a native allreduce. With `completes` false,
// post_native answers UNSUPPORTED (as the interface's default does); with it true, the
// "allreduce" copies input to output and is done at once (a stand-in that checks the probe's
// use of post_native/test, not a real collective).
class FakeNativeTransport : public Transport {
 public:
  FakeNativeTransport(Transport* inner, bool completes) : inner_(inner), completes_(completes) {}
  const char* name() const override { return inner_->name(); }
  TransportCapabilities capabilities() const override {
    TransportCapabilities caps = inner_->capabilities();
    caps.native_allreduce = true;
    return caps;
  }
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override {
    return inner_->isend(peer, channel, header, payload, bytes, handle);
  }
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override {
    return inner_->irecv(peer, channel, expected, payload, bytes, handle);
  }
  Status test(Handle handle, bool* done, size_t* payload_bytes) override {
    if (handle != kNativeHandle) return inner_->test(handle, done, payload_bytes);
    *done = true;
    return Status::ok();
  }
  Status progress(Milliseconds max_wait, bool* activity) override {
    return inner_->progress(max_wait, activity);
  }
  bool supports_native(NativeCollective kind, tidegate_dtype_t dtype, tidegate_reduce_op_t op,
                       tidegate_memory_t memory) const override {
    return kind == NativeCollective::kAllreduce && dtype == TIDEGATE_FLOAT32 &&
           op == TIDEGATE_SUM && memory == TIDEGATE_MEMORY_HOST;
  }
  Status post_native(const WireHeader& header, const NativeCollectiveArgs& args,
                     Handle* handle) override {
    if (!completes_) return Transport::post_native(header, args, handle);
    EXPECT_EQ(header.op_kind, OpKind::kAllreduce);
    EXPECT_EQ(header.count, args.count);
    EXPECT_EQ(header.payload_bytes, static_cast<uint64_t>(args.count) * sizeof(float));
    std::memcpy(args.output, args.input, static_cast<size_t>(args.count) * sizeof(float));
    ++natives;
    *handle = kNativeHandle;
    return Status::ok();
  }
  void wake() override { inner_->wake(); }
  void abort(const Status& reason) override { inner_->abort(reason); }
  Status close(Deadline deadline) override { return inner_->close(deadline); }
  int natives = 0;

 private:
  static constexpr Handle kNativeHandle = ~Handle{0};
  Transport* inner_;
  bool completes_;
};

struct RankResult {
  Status status;
  ProbeProfile profile;
  double wall_ms = 0;
};

// Runs run_probe on every rank at once; `transport_of(rank)` gives each rank's transport.
std::vector<RankResult> run_all(int size, Store* store,
                                const std::function<Transport*(int)>& transport_of,
                                const std::function<void(Config*)>& configure = {}) {
  std::vector<RankResult> results(static_cast<size_t>(size));
  tcp_testing::run_ranks(size, [&](int rank) {
    Config config;
    EXPECT_TRUE(config.set("TIDEGATE_PROBE_BUDGET_MS", std::to_string(kBudgetMs)).is_ok());
    if (rank == 0 && std::getenv("PROBE_TEST_DEBUG")) set_log_level(3);
    if (configure) configure(&config);
    ProbeInputs inputs;
    inputs.rank = rank;
    inputs.size = size;
    inputs.comm_id = tcp_testing::kCommId;
    inputs.config = &config;
    inputs.store = store;
    inputs.transports = {transport_of(rank)};
    inputs.deadline = Deadline::after_ms(20000);
    const Clock::time_point start = Clock::now();
    results[rank].status = run_probe(inputs, &results[rank].profile);
    results[rank].wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  });
  return results;
}

void expect_identical(const std::vector<RankResult>& results) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    ASSERT_TRUE(results[rank].status.is_ok())
        << "rank " << rank << ": " << results[rank].status.to_string();
    EXPECT_EQ(results[rank].profile.to_text(), results[0].profile.to_text()) << "rank " << rank;
  }
}

std::string temp_path(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "tidegate_probe_" + name + "_" + std::to_string(::getpid());
  std::remove(path.c_str());
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ProbeRanks : public ::testing::TestWithParam<int> {};

TEST_P(ProbeRanks, MeasuresAgreesAndKeepsTheBudget) {
  const int size = GetParam();
  TcpWorld world(size);
  ASSERT_TRUE(world.all_ok());
  const auto results =
      run_all(size, &world.store(), [&](int rank) { return &world.transport(rank); });
  expect_identical(results);
  const ProbeProfile& p = results[0].profile;
  EXPECT_EQ(p.size, size);
  EXPECT_EQ(p.source, "measured");
  ASSERT_EQ(p.transports.size(), 1u);
  const TransportFigures& tcp = p.transports[0];
  EXPECT_EQ(tcp.transport, "tcp");
  EXPECT_TRUE(std::isfinite(tcp.alpha_us) && std::isfinite(tcp.bandwidth_GBps));
  if (size > 1) {
    EXPECT_GT(tcp.alpha_us, 0);
  }
  EXPECT_GT(tcp.bandwidth_GBps, 0);
  EXPECT_TRUE(std::isfinite(p.reduce_GBps) && p.reduce_GBps > 0);
  EXPECT_EQ(tcp.native_bandwidth_GBps, 0);  // tcp offers no native collectives
  EXPECT_GT(p.probe_ms, 0);
  EXPECT_LT(p.probe_ms, kBudgetMs + kSlackMs);
  for (const RankResult& r : results) EXPECT_LT(r.wall_ms, kBudgetMs + kSlackMs);
  std::printf("probe over %d ranks: %s\n", size, p.to_json().c_str());
}

INSTANTIATE_TEST_SUITE_P(Sizes, ProbeRanks, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "ranks";
                         });

TEST(Probe, NativeAllreduceIsTimedWhenOfferedAndSkippedWhenRefused) {
  TcpWorld world(3);
  ASSERT_TRUE(world.all_ok());
  for (bool completes : {false, true}) {
    std::vector<std::unique_ptr<FakeNativeTransport>> fakes;
    for (int r = 0; r < 3; ++r)
      fakes.push_back(std::make_unique<FakeNativeTransport>(&world.transport(r), completes));
    auto store = make_prefix_store(&world.store(), completes ? "completes/" : "refuses/");
    const auto results = run_all(3, store.get(), [&](int r) { return fakes[r].get(); });
    expect_identical(results);
    const TransportFigures& t = results[0].profile.transports[0];
    EXPECT_GT(t.bandwidth_GBps, 0);
    if (completes) {
      EXPECT_TRUE(std::isfinite(t.native_bandwidth_GBps) && t.native_bandwidth_GBps > 0);
      EXPECT_TRUE(std::isfinite(t.native_alpha_us) && t.native_alpha_us >= 0);
      for (const auto& fake : fakes) EXPECT_EQ(fake->natives, 8);  // 2 sizes x (1 warm-up + 3)
    } else {
      EXPECT_EQ(t.native_alpha_us, 0);
      EXPECT_EQ(t.native_bandwidth_GBps, 0);
    }
  }
}

TEST(Probe, SingleRankUsesNeitherWireNorStore) {
  UntouchableTransport transport;
  CountingStore store(nullptr);
  const auto results = run_all(1, &store, [&](int) { return &transport; });
  expect_identical(results);
  EXPECT_EQ(transport.calls, 0);
  EXPECT_EQ(store.calls, 0);
  EXPECT_EQ(results[0].profile.transports[0].alpha_us, 0);
  EXPECT_GT(results[0].profile.transports[0].bandwidth_GBps, 0);
}

TEST(Probe, OffGivesDefaultsWithoutWireOrStore) {
  std::vector<UntouchableTransport> transports(4);
  CountingStore store(nullptr);
  const auto results = run_all(
      4, &store, [&](int rank) { return &transports[rank]; },
      [](Config* c) { ASSERT_TRUE(c->set("TIDEGATE_PROBE", "off").is_ok()); });
  expect_identical(results);
  EXPECT_EQ(results[0].profile.to_text(), ProbeProfile::defaults(4, {"tcp"}).to_text());
  EXPECT_EQ(store.calls, 0);
  for (const UntouchableTransport& t : transports) EXPECT_EQ(t.calls, 0);
}

TEST(Probe, CacheIsWrittenThenLoadedWithoutMeasuring) {
  const std::string path = temp_path("roundtrip");
  auto use_cache = [&](Config* c) { ASSERT_TRUE(c->set("TIDEGATE_PROBE_CACHE", path).is_ok()); };
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  auto first_store = make_prefix_store(&world.store(), "first/");
  const auto first = run_all(
      2, first_store.get(), [&](int r) { return &world.transport(r); }, use_cache);
  expect_identical(first);
  EXPECT_EQ(first[0].profile.source, "measured");
  EXPECT_EQ(read_file(path), "tidegate-probe-cache 2\n" + first[0].profile.to_text());

  // The second job must not measure: its transports fail on any use.
  std::vector<UntouchableTransport> untouchable(2);
  auto second_store = make_prefix_store(&world.store(), "second/");
  const auto second = run_all(
      2, second_store.get(), [&](int r) { return &untouchable[r]; }, use_cache);
  expect_identical(second);
  const ProbeProfile& loaded = second[0].profile;
  EXPECT_EQ(loaded.source, "cache:" + path);
  EXPECT_EQ(loaded.probe_ms, 0);
  ProbeProfile expected = first[0].profile;
  expected.source = loaded.source;
  expected.probe_ms = 0;
  EXPECT_EQ(loaded.to_text(), expected.to_text());
  for (const UntouchableTransport& t : untouchable) EXPECT_EQ(t.calls, 0);
  std::remove(path.c_str());
}

TEST(Probe, CacheForOtherRanksOrTransportsIsMeasuredAgain) {
  const std::string path = temp_path("mismatch");
  auto use_cache = [&](Config* c) { ASSERT_TRUE(c->set("TIDEGATE_PROBE_CACHE", path).is_ok()); };
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  const std::vector<ProbeProfile> stale = {ProbeProfile::defaults(3, {"tcp"}),
                                           ProbeProfile::defaults(2, {"mpi"})};
  for (size_t i = 0; i < stale.size(); ++i) {
    ASSERT_TRUE(save_probe_cache(path, stale[i]).is_ok());
    auto store = make_prefix_store(&world.store(), "run" + std::to_string(i) + "/");
    const auto results = run_all(
        2, store.get(), [&](int r) { return &world.transport(r); }, use_cache);
    expect_identical(results);
    EXPECT_EQ(results[0].profile.source, "measured") << i;
    EXPECT_GT(results[0].profile.probe_ms, 0) << i;
    EXPECT_EQ(read_file(path), "tidegate-probe-cache 2\n" + results[0].profile.to_text()) << i;
  }
  std::remove(path.c_str());
}

TEST(Probe, MalformedCacheIsMeasuredAgainWithAWarning) {
  const std::string path = temp_path("malformed");
  {
    std::ofstream out(path);
    out << "tidegate-probe-cache 2\nsize 2\nsource measured\nprobe_ms banana\n";
  }
  auto use_cache = [&](Config* c) { ASSERT_TRUE(c->set("TIDEGATE_PROBE_CACHE", path).is_ok()); };
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  set_log_level(static_cast<int>(LogLevel::kWarn));
  ::testing::internal::CaptureStderr();
  const auto results = run_all(
      2, &world.store(), [&](int r) { return &world.transport(r); }, use_cache);
  const std::string log = ::testing::internal::GetCapturedStderr();
  expect_identical(results);
  EXPECT_EQ(results[0].profile.source, "measured");
  EXPECT_NE(log.find("ignoring the cache file " + path), std::string::npos) << log;
  EXPECT_NE(log.find("probe_ms"), std::string::npos)
      << "the warning should say what is wrong: " << log;
  EXPECT_EQ(read_file(path), "tidegate-probe-cache 2\n" + results[0].profile.to_text());
  std::remove(path.c_str());
}

TEST(Probe, AbsentPeerTimesOutNamingTransportAndPeer) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_PROBE_BUDGET_MS", "50").is_ok());
  ProbeInputs inputs;
  inputs.rank = 0;
  inputs.size = 2;
  inputs.comm_id = tcp_testing::kCommId;
  inputs.config = &config;
  inputs.store = &world.store();
  inputs.transports = {&world.transport(0)};
  inputs.deadline = Deadline::after_ms(300);
  ProbeProfile profile;
  Status st = run_probe(inputs, &profile);  // rank 1 never joins
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();
  EXPECT_NE(st.message().find("transport tcp"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("with rank 1"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tidegate
