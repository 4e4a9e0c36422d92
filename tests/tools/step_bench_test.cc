// tidegate-bench --step: the profile reader and the emulated step offline, then the bench end
// to end on the ResNet-50 profile under tidegate-run (it fails by itself when the ranks'
// gradients differ after any phase).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "bench/tidegate_bench/step_profile.h"
#include "bench/tidegate_bench/step_sync.h"
#include "subprocess.h"

namespace tidegate::bench {
namespace {

// A tensor entry of a profile file; layer FLOPs given per tensor as the files do.
std::string tensor_json(const std::string& name, const std::string& layer, int64_t numel,
                        int forward, int backward, double flops) {
  return "{\"name\":\"" + name + "\",\"shape\":[" + std::to_string(numel) +
         "],\"numel\":" + std::to_string(numel) + ",\"dtype\":\"float32\",\"layer\":\"" + layer +
         "\",\"forward_index\":" + std::to_string(forward) +
         ",\"backward_index\":" + std::to_string(backward) +
         ",\"layer_flops_fwd_bwd\":" + std::to_string(flops) + "}";
}

// Three layers: fc (3 units of FLOPs), a norm (0) and conv (1); conv is needed first.
std::string small_profile() {
  return "{\"model\":\"tiny\",\"note\":\"x\",\"tensors\":[" +
         tensor_json("fc.bias", "fc", 10, 4, 0, 3e9) + "," +
         tensor_json("fc.weight", "fc", 300000, 3, 1, 3e9) + "," +
         tensor_json("bn.weight", "bn", 7, 2, 2, 0) + "," +
         tensor_json("bn.bias", "bn", 7, 1, 3, 0) + "," +
         tensor_json("conv.weight", "conv", 600000, 0, 4, 1e9) + "]}";
}

TEST(StepProfile, ReadsTheFieldsInBackwardOrder) {
  StepProfile p;
  ASSERT_TRUE(parse_step_profile(small_profile(), "tiny.json", &p).is_ok());
  EXPECT_EQ(p.model, "tiny");
  ASSERT_EQ(p.tensors.size(), 5u);
  EXPECT_EQ(p.tensors[1].name, "fc.weight");
  EXPECT_EQ(p.tensors[4].forward_index, 0);
  EXPECT_EQ(p.total_numel(), 900024);
}

TEST(StepProfile, RefusesInconsistentFiles) {
  StepProfile p;
  std::string text = small_profile();
  // numel no longer the product of the shape
  std::string bad = text;
  bad.replace(bad.find("\"numel\":10"), 10, "\"numel\":11");
  Status st = parse_step_profile(bad, "bad.json", &p);
  EXPECT_NE(st.message().find("fc.bias"), std::string::npos) << st.message();
  // forward_index repeated
  bad = text;
  bad.replace(bad.find("\"forward_index\":4"), 17, "\"forward_index\":3");
  EXPECT_FALSE(parse_step_profile(bad, "bad.json", &p).is_ok());
  // not JSON at all: the offset is named
  st = parse_step_profile("{\"model\": tiny}", "bad.json", &p);
  EXPECT_NE(st.message().find("byte 12"), std::string::npos) << st.message();
  EXPECT_FALSE(load_step_profile("/nonexistent/profile.json", &p).is_ok());
}


TEST(StepWorkload, SpreadsComputeByLayerFlops) {
  StepProfile p;
  ASSERT_TRUE(parse_step_profile(small_profile(), "tiny.json", &p).is_ok());
  const StepWorkload w = make_step_workload(p, 40, 20);
  ASSERT_EQ(w.layers.size(), 3u);
  // Forward order: conv (needed first), bn, fc.
  EXPECT_EQ(w.layers[0].name, "conv");
  EXPECT_EQ(w.layers[2].name, "fc");
  EXPECT_DOUBLE_EQ(w.layers[0].backward_s, 0.010);
  EXPECT_DOUBLE_EQ(w.layers[1].backward_s, 0.0);
  EXPECT_DOUBLE_EQ(w.layers[2].backward_s, 0.030);
  EXPECT_DOUBLE_EQ(w.layers[2].forward_s, 0.015);
  EXPECT_EQ(w.first_needed, 4u);
  EXPECT_EQ(w.offsets[4], 300024);
  EXPECT_EQ(w.layer_of[0], 2u);
}

TEST(StepSync, DdpBucketsCloseAtTheirCap) {
  StepProfile p;
  ASSERT_TRUE(parse_step_profile(small_profile(), "tiny.json", &p).is_ok());
  const StepWorkload w = make_step_workload(p, 1, 1);
  // 1 MB first cap: fc.bias + fc.weight (1.2 MB) close the first; the rest fits 25 MB.
  const auto buckets = ddp_buckets(w, 1 << 20, 25 << 20);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(buckets[1], (std::vector<size_t>{2, 3, 4}));
}

TEST(StepSync, ModeNames) {
  std::vector<StepMode> modes;
  ASSERT_TRUE(parse_step_modes("all", &modes).is_ok());
  EXPECT_EQ(modes.size(), 4u);
  ASSERT_TRUE(parse_step_modes("session-fifo,ddp", &modes).is_ok());
  EXPECT_EQ(modes, (std::vector<StepMode>{StepMode::kSessionFifo, StepMode::kDdp}));
  EXPECT_FALSE(parse_step_modes("session,bogus", &modes).is_ok());
}

TEST(StepProfile, ShippedProfilesLoad) {
  for (const char* model : {"resnet50", "bert-base", "gpt2-small"}) {
    StepProfile p;
    const std::string path = std::string(TIDEGATE_PROFILES_DIR) + "/" + model + ".json";
    Status st = load_step_profile(path, &p);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_GT(p.tensors.size(), 100u) << model;
  }
  StepProfile resnet;
  ASSERT_TRUE(
      load_step_profile(std::string(TIDEGATE_PROFILES_DIR) + "/resnet50.json", &resnet).is_ok());
  EXPECT_EQ(resnet.total_numel(), 25557032);
  const StepWorkload w = make_step_workload(resnet, 60, 30);
  EXPECT_EQ(w.tensors[w.first_needed].name, "conv1.weight");
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(StepBenchUnderTidegateRun, ResNet50EveryModeIdenticalOnEveryRank) {
  char json[] = "/tmp/tidegate-step-test-XXXXXX";
  const int fd = ::mkstemp(json);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::vector<std::string> argv = {TIDEGATE_RUN_PATH,
                                         "-n",
                                         "3",
                                         "--",
                                         TIDEGATE_BENCH_PATH,
                                         "--step",
                                         std::string(TIDEGATE_PROFILES_DIR) + "/resnet50.json",
                                         "--backward-ms",
                                         "20",
                                         "-w",
                                         "1",
                                         "-n",
                                         "2",
                                         "--json",
                                         json};
  // A deadline well inside the test's: a session that loses a gradient fails naming it.
  tidegate::testing::ProcessResult r = tidegate::testing::run_process(
      argv, std::chrono::seconds(280), {"TIDEGATE_TIMEOUT_MS=60000"});
  const std::vector<std::string> rows = lines_of(json);
  ::unlink(json);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("bitwise identical on every rank"), std::string::npos) << r.out;
  ASSERT_EQ(rows.size(), 4u) << r.out;
  const char* modes[] = {"noverlap", "ddp", "session", "session-fifo"};
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].substr(0, 400));
    EXPECT_NE(rows[i].find(std::string("\"mode\":\"") + modes[i] + "\""), std::string::npos);
    EXPECT_NE(rows[i].find("\"timeline\":{"), std::string::npos);
    EXPECT_EQ(rows[i].find("null"), std::string::npos);  // every figure measured, every unit done
  }
}

}  // namespace
}  // namespace tidegate::bench
