// tidegate-info end to end: alone it prints the build and the configuration; inside a job
// (tidegate-run) rank 0 prints the probe's figures and the plan, and --json carries a "probe"
// object mapping each transport to alpha_us and bandwidth_GBps. A profile cache written by the
// first run is loaded by the second (no measuring).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>

#include "subprocess.h"

namespace tidegate::testing {
namespace {

using std::chrono::seconds;

// The number after "key": in `text` (first occurrence after `from`), or -1.
double number_after(const std::string& text, const std::string& key, size_t from = 0) {
  const size_t at = text.find("\"" + key + "\":", from);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() + 3));
}

TEST(TidegateInfo, AloneShowsBuildAndConfiguration) {
  ProcessResult r = run_process({TIDEGATE_INFO_PATH, "--json"}, seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"\"version\"", "\"transports\"", "\"build\"", "\"mpi\"", "\"nccl\"",
                          "\"TIDEGATE_TUNE\"", "\"TIDEGATE_PROBE_BUDGET_MS\""}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
  }
  EXPECT_EQ(r.out.find("\"probe\""), std::string::npos) << "no job, no probe";
}

TEST(TidegateInfo, InsideAJobShowsTheProbeAndThePlan) {
  ProcessResult r = run_process({TIDEGATE_RUN_PATH, "-n", "3", "--", TIDEGATE_INFO_PATH, "--json"},
                                seconds(120), {"TIDEGATE_PROBE_BUDGET_MS=300"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string& out = r.out;
  const size_t probe = out.find("\"probe\":{");
  ASSERT_NE(probe, std::string::npos) << out;
  const size_t tcp = out.find("\"tcp\":{", probe);
  ASSERT_NE(tcp, std::string::npos) << out;
  EXPECT_GT(number_after(out, "alpha_us", tcp), 0) << out;
  EXPECT_GT(number_after(out, "bandwidth_GBps", tcp), 0) << out;
  EXPECT_GT(number_after(out, "ranks"), 2.5);
  EXPECT_NE(out.find("\"plan\":[{"), std::string::npos) << out;
  EXPECT_NE(out.find("\"collective\":\"allreduce\""), std::string::npos) << out;
  // Only rank 0 prints: one JSON object.
  EXPECT_EQ(out.find("\"transports\":["), out.rfind("\"transports\":[")) << out;
  // The probe is bounded: 300 ms budget plus agreement.
  EXPECT_LT(number_after(out, "probe_ms"), 1000) << out;
}

TEST(TidegateInfo, ProfileCacheSkipsTheProbeOnTheNextRun) {
  char dir[] = "/tmp/tidegate-info-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string cache = std::string(dir) + "/profile";
  const std::vector<std::string> env = {"TIDEGATE_PROBE_CACHE=" + cache,
                                        "TIDEGATE_PROBE_BUDGET_MS=200"};
  ProcessResult first = run_process(
      {TIDEGATE_RUN_PATH, "-n", "2", "--", TIDEGATE_INFO_PATH, "--json"}, seconds(120), env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("\"probe_source\":\"measured\""), std::string::npos) << first.out;
  ASSERT_TRUE(std::ifstream(cache).good()) << "rank 0 writes the cache";
  ProcessResult second = run_process(
      {TIDEGATE_RUN_PATH, "-n", "2", "--", TIDEGATE_INFO_PATH, "--json"}, seconds(120), env);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("\"probe_source\":\"cache:"), std::string::npos) << second.out;
  EXPECT_EQ(number_after(second.out, "probe_ms"), 0) << second.out;
  // The same figures: the probe section of both runs is identical.
  auto probe_of = [](const std::string& out) {
    return out.substr(out.find("\"probe\":{"), out.find("\"plan\"") - out.find("\"probe\":{"));
  };
  EXPECT_EQ(probe_of(first.out), probe_of(second.out));
  ::unlink(cache.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace tidegate::testing
