// Codec "auto" through the public API and the whole stack (ranks as threads, TCP over
// loopback): every rank gets the same bytes and reports the same choice, never a codec outside
// its allow-list; ranks whose allow-lists differ get MISMATCH; bad options are refused at the
// call; and a cached profile that lies about the codecs (a million GB/s each) makes auto
// compress only until the first re-planning round has measured it, then go back to dense on
// every rank at once, sending the residuals it held back (nothing is lost at the switch).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.hpp"

namespace tidegate::testing {
namespace {

using Settings = std::vector<std::pair<std::string, std::string>>;

// `size` communicators made concurrently, rank r with settings[r] (or settings[0] for all).
class SettingsWorld {
 public:
  SettingsWorld(int size, const std::vector<Settings>& settings) : comms_(size, nullptr) {
    const tidegate_store_t callbacks = ThreadWorld::callbacks(&store_);
    std::vector<tidegate_status_t> created(size, TIDEGATE_OK);
    std::vector<std::string> errors(size);
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        const Settings& mine = settings.size() > 1 ? settings[r] : settings[0];
        std::vector<tidegate_setting_t> list;
        for (const auto& [name, value] : mine) list.push_back({name.c_str(), value.c_str()});
        created[r] = tidegate_comm_create_with_settings(r, size, &callbacks, list.data(),
                                                        list.size(), &comms_[r]);
        if (created[r] != TIDEGATE_OK) errors[r] = tidegate_last_error();
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < size; ++r) status_ = status_ == TIDEGATE_OK ? created[r] : status_;
    for (int r = 0; r < size; ++r) error_ += errors[r].empty() ? "" : errors[r] + "\n";
  }
  ~SettingsWorld() {
    std::vector<std::thread> threads;
    for (tidegate_comm_t comm : comms_) {
      if (comm != nullptr) threads.emplace_back([comm] { tidegate_comm_destroy(comm); });
    }
    for (auto& t : threads) t.join();
  }
  tidegate_status_t status() const { return status_; }
  const std::string& error() const { return error_; }
  void run(const std::function<void(int, tidegate_comm_t)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(comms_.size()); ++r) {
      threads.emplace_back([&, r] { body(r, comms_[r]); });
    }
    for (auto& t : threads) t.join();
  }

 private:
  MemoryStore store_;
  std::vector<tidegate_comm_t> comms_;
  tidegate_status_t status_ = TIDEGATE_OK;
  std::string error_;
};

std::vector<float> gradient(int rank, int64_t n, int step) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.001f * static_cast<float>(i * (rank + 2) + step * 7)) *
           (i % 97 == 0 ? 2.0f : 0.01f);
  }
  return x;
}

struct Outcome {
  tidegate_status_t status = TIDEGATE_OK;
  std::string choice, error;
};

// One auto allreduce of `x` into `out`; the outcome's choice is tidegate_request_choice's.
Outcome auto_allreduce(tidegate_comm_t comm, std::vector<float>& x, std::vector<float>& out,
                       uint64_t key, int ef, const char* allowed = nullptr,
                       const char* codec = "auto") {
  const int64_t n = static_cast<int64_t>(x.size());
  out.assign(x.size(), 0.0f);
  tidegate_tensor_t in = tidegate_host_tensor(x.data(), n, TIDEGATE_FLOAT32);
  tidegate_tensor_t o = tidegate_host_tensor(out.data(), n, TIDEGATE_FLOAT32);
  tidegate_compression_t c{};
  c.codec = codec;
  c.key = key;
  c.error_feedback = ef;
  c.allowed = allowed;
  Outcome result;
  tidegate_request_t request = nullptr;
  result.status = tidegate_icompressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c, &request);
  if (result.status == TIDEGATE_OK) result.status = tidegate_request_wait(request, -1);
  if (result.status != TIDEGATE_OK) {
    result.error = tidegate_last_error();
  } else {
    char buffer[256];
    EXPECT_EQ(tidegate_request_choice(request, buffer, sizeof buffer), TIDEGATE_OK);
    result.choice = buffer;
    char tiny[4];
    EXPECT_EQ(tidegate_request_choice(request, tiny, sizeof tiny), TIDEGATE_ERR_INVALID_ARGUMENT);
  }
  tidegate_request_free(request);
  return result;
}

bool compressed(const std::string& choice) { return choice.find('+') != std::string::npos; }

TEST(AutoCodec, IdenticalOnEveryRankWithTheSameChoiceNeverOutsideTheAllowList) {
  // TUNE fixes the choices (on loopback the model's own would depend on the measured figures):
  // dense up to 64 KiB, qsgd from 1 MiB up.
  SettingsWorld world(3, {{{"TIDEGATE_CODECS", "fp16,none,qsgd:bits=4,bucket=512"},
                           {"TIDEGATE_TUNE",
                            "allreduce:0-64K:codec=none#"
                            "allreduce:1M-inf:codec=qsgd:bits=4,bucket=512"}}});
  ASSERT_EQ(world.status(), TIDEGATE_OK) << world.error();
  for (int64_t n : {int64_t{1000}, int64_t{1} << 20}) {
    SCOPED_TRACE(n);
    std::vector<std::vector<float>> out(3);
    std::vector<Outcome> outcomes(3);
    world.run([&](int rank, tidegate_comm_t comm) {
      std::vector<float> x = gradient(rank, n, 0);
      outcomes[rank] = auto_allreduce(comm, x, out[rank], 7, 1);
    });
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(outcomes[r].status, TIDEGATE_OK) << outcomes[r].error;
      EXPECT_EQ(outcomes[r].choice, outcomes[0].choice) << "rank " << r;
      ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), n * sizeof(float)), 0) << "rank " << r;
    }
    if (n < (1 << 18)) {
      EXPECT_FALSE(compressed(outcomes[0].choice)) << outcomes[0].choice;
      // Dense is exact here: every rank's sum in float32 of three inputs.
      const std::vector<float> a = gradient(0, n, 0), b = gradient(1, n, 0), c = gradient(2, n, 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(out[0][i], a[i] + b[i] + c[i], 1e-6) << i;
    } else {
      EXPECT_NE(outcomes[0].choice.find("+qsgd:bits=4,bucket=512"), std::string::npos)
          << outcomes[0].choice;
    }
  }
  // A call's own allow-list replaces TIDEGATE_CODECS: fp16 alone cannot satisfy the qsgd rule.
  std::vector<Outcome> outcomes(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> x = gradient(rank, 1 << 20, 0), out;
    outcomes[rank] = auto_allreduce(comm, x, out, 8, 0, "fp16");
  });
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.status, TIDEGATE_ERR_CONFIG) << o.choice;
    EXPECT_NE(o.error.find("allow-list"), std::string::npos) << o.error;
  }
}

TEST(AutoCodec, TheCppRequestReportsTheChoice) {
  SettingsWorld world(2, {{{"TIDEGATE_CODECS", "fp16"},
                           {"TIDEGATE_TUNE", "allreduce:0-inf:codec=fp16"}}});
  ASSERT_EQ(world.status(), TIDEGATE_OK) << world.error();
  std::vector<std::string> choices(2);
  world.run([&](int rank, tidegate_comm_t handle) {
    std::vector<float> x = gradient(rank, 4096, 0), out(4096);
    tidegate_tensor_t in = tidegate_host_tensor(x.data(), 4096, TIDEGATE_FLOAT32);
    tidegate_tensor_t o = tidegate_host_tensor(out.data(), 4096, TIDEGATE_FLOAT32);
    Compression c;
    c.codec = "auto";
    c.key = 3;
    const tidegate_compression_t options = c.c();
    tidegate_request_t raw = nullptr;
    ASSERT_EQ(tidegate_icompressed_allreduce(handle, &in, &o, TIDEGATE_SUM, &options, &raw),
              TIDEGATE_OK)
        << tidegate_last_error();
    Request request(raw);
    request.wait();
    choices[rank] = request.choice();
  });
  EXPECT_EQ(choices[0], choices[1]);
  EXPECT_NE(choices[0].find("+fp16"), std::string::npos) << choices[0];
}

TEST(AutoCodec, RanksWithDifferentAllowListsGetMismatchOnEveryRank) {
  SettingsWorld world(3, {{{"TIDEGATE_TIMEOUT_MS", "20000"}}});
  ASSERT_EQ(world.status(), TIDEGATE_OK) << world.error();
  std::vector<Outcome> outcomes(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> x = gradient(rank, 5000, 0), out;
    outcomes[rank] = auto_allreduce(comm, x, out, 4, 0, rank == 1 ? "fp16" : "fp16,onebit");
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_MISMATCH) << "rank " << r << ": "
                                                         << outcomes[r].error;
  }
}

TEST(AutoCodec, BadOptionsAreRefusedAtTheCall) {
  SettingsWorld world(1, {{}});
  ASSERT_EQ(world.status(), TIDEGATE_OK) << world.error();
  world.run([&](int, tidegate_comm_t comm) {
    std::vector<float> x(64, 1.0f), out(64);
    tidegate_tensor_t in = tidegate_host_tensor(x.data(), 64, TIDEGATE_FLOAT32);
    tidegate_tensor_t o = tidegate_host_tensor(out.data(), 64, TIDEGATE_FLOAT32);
    tidegate_compression_t c{};
    c.codec = "auto";
    c.algorithm = "sra";
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tidegate_last_error()).find("picks its own algorithm"),
              std::string::npos)
        << tidegate_last_error();
    c.algorithm = nullptr;
    c.allowed = "fp16,auto";
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c), TIDEGATE_ERR_CONFIG);
    c.allowed = "qsgd:bits=99";
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c), TIDEGATE_ERR_CONFIG);
    EXPECT_NE(std::string(tidegate_last_error()).find("allowed"), std::string::npos)
        << tidegate_last_error();
    c.codec = "fp16";
    c.allowed = "fp16";
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    c.codec = "auto";
    c.allowed = nullptr;
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_MAX, &c),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    // The communicator goes on.
    EXPECT_EQ(tidegate_compressed_allreduce(comm, &in, &o, TIDEGATE_SUM, &c), TIDEGATE_OK)
        << tidegate_last_error();
    EXPECT_EQ(out[0], 1.0f);
  });
}

TEST(AutoCodec, AMalformedTidegateCodecsFailsCreationNamingIt) {
  SettingsWorld world(2, {{{"TIDEGATE_CODECS", "fp16,qsgd:bits=99"}}});
  EXPECT_EQ(world.status(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(world.error().find("TIDEGATE_CODECS"), std::string::npos) << world.error();
}

// Rewrites every codec throughput of a cached profile to `GBps`.
void lie_about_codecs(const std::string& path, const char* GBps) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream edited;
  std::string line;
  int lies = 0;
  while (std::getline(in, line)) {
    if (line.rfind("encode_GBps ", 0) == 0 || line.rfind("decode_GBps ", 0) == 0) {
      line = line.substr(0, line.find(' ') + 1) + GBps;
      ++lies;
    }
    edited << line << "\n";
  }
  in.close();
  ASSERT_GT(lies, 0) << "the cached profile holds no codec figures";
  std::ofstream(path, std::ios::trunc) << edited.str();
}

TEST(AutoCodec, ALyingProfileCompressesOnlyUntilMeasuredThenDenseOnEveryRankLosingNothing) {
  const std::string cache = "/tmp/tidegate_auto_codec_test_" + std::to_string(::getpid());
  const int ranks = 3;
  {
    // A budget ample enough for every codec's figures under ThreadSanitizer too, where a
    // quarter of the default 800 ms measured none of them (they are what the lie rewrites).
    SettingsWorld honest(ranks, {{{"TIDEGATE_PROBE_CACHE", cache},
                                  {"TIDEGATE_PROBE_BUDGET_MS", "20000"}}});
    ASSERT_EQ(honest.status(), TIDEGATE_OK) << honest.error();
  }
  lie_about_codecs(cache, "1000000");
  const int interval = 6;
  SettingsWorld world(ranks, {{{"TIDEGATE_PROBE_CACHE", cache},
                               {"TIDEGATE_CODECS", "qsgd:bits=8,bucket=512"},
                               {"TIDEGATE_REPLAN_INTERVAL", std::to_string(interval)}}});
  ::unlink(cache.c_str());
  ASSERT_EQ(world.status(), TIDEGATE_OK) << world.error();
  const int64_t n = int64_t{1} << 21;  // 8 MiB: loopback sends it far faster than qsgd encodes
  const int steps = 4 * interval;
  std::vector<std::vector<std::string>> choices(ranks);
  std::vector<std::vector<double>> delivered(ranks, std::vector<double>(n, 0.0));
  std::vector<double> expected(n, 0.0);
  std::vector<std::string> errors(ranks);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> out;
    for (int step = 0; step < steps; ++step) {
      std::vector<float> x = gradient(rank, n, step);
      const Outcome o = auto_allreduce(comm, x, out, 11, 1);
      if (o.status != TIDEGATE_OK) {
        errors[rank] = o.error;
        return;
      }
      choices[rank].push_back(o.choice);
      for (int64_t i = 0; i < n; ++i) delivered[rank][i] += out[i];
    }
  });
  for (int r = 0; r < ranks; ++r) ASSERT_TRUE(errors[r].empty()) << errors[r];
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(choices[r], choices[0]) << "rank " << r;
  ASSERT_TRUE(compressed(choices[0].front())) << "the lie should have won the first plan: "
                                               << choices[0].front();
  // Back to dense within one re-planning round (plus the round in flight), and staying there.
  int first_dense = -1;
  for (int s = 0; s < steps; ++s) {
    if (!compressed(choices[0][s]) && first_dense < 0) first_dense = s;
    if (first_dense >= 0) {
      EXPECT_FALSE(compressed(choices[0][s])) << "step " << s;
    }
  }
  ASSERT_GE(first_dense, 0) << "auto never went back to dense";
  EXPECT_LE(first_dense, 2 * interval) << choices[0][first_dense - 1];
  // Nothing lost: what the steps delivered is what the ranks put in (error feedback held back
  // qsgd's rounding, and the switch to dense sent it).
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < ranks; ++r) {
      const std::vector<float> x = gradient(r, n, step);
      for (int64_t i = 0; i < n; ++i) expected[i] += x[i];
    }
  }
  double error = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    error += (delivered[0][i] - expected[i]) * (delivered[0][i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  EXPECT_LT(std::sqrt(error / norm), 1e-5) << "residuals were lost at the switch";
}

}  // namespace
}  // namespace tidegate::testing
