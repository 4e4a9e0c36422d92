// The gradient session through the whole stack (ranks as threads over loopback TCP): random
// readiness orders per rank give bitwise-identical results and the same ops on every rank;
// fused, cut or alone, a dense gradient's result is the same bits; compressed gradients ride
// along; a key marked on one rank only is a named error on every rank within the deadline; a
// session used from two threads (backward marking, forward waiting) as documented; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.h"

namespace tidegate::testing {
namespace {

// Sizes that hit the scheduler's edges: empty, one element, just over a 4 MiB piece, many small
// ones (more than fit one fusion), one far larger than the rest.
std::vector<int64_t> edge_counts() {
  std::vector<int64_t> counts = {0, 1, (int64_t{1} << 20) + 3, 3 << 20};
  for (int i = 0; i < 40; ++i) counts.push_back(37 + 101 * i);
  return counts;
}

struct RankGradients {
  std::vector<std::vector<float>> buffers;
  std::vector<tidegate_gradient_t> specs;
};

RankGradients make_gradients(const std::vector<int64_t>& counts, int rank, int step) {
  RankGradients g;
  g.buffers.resize(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    auto& b = g.buffers[i];
    b.resize(static_cast<size_t>(counts[i]));
    for (size_t e = 0; e < b.size(); ++e) {
      b[e] = std::sin(0.001f * static_cast<float>(e) + 0.37f * static_cast<float>(rank) +
                      0.11f * static_cast<float>(i + 3 * step)) *
             1.7f;
    }
    tidegate_gradient_t spec{};
    spec.key = 500 + i;
    spec.tensor = tidegate_host_tensor(b.data(), counts[i], TIDEGATE_FLOAT32);
    spec.priority = static_cast<int>(i);
    g.specs.push_back(spec);
  }
  return g;
}

// Runs `steps` steps on every rank, each rank marking its gradients in its own seeded random
// order from a thread; returns per rank the final buffers and the per-step op counts.
struct SessionRun {
  std::vector<std::vector<std::vector<float>>> buffers;  // [rank][gradient]
  std::vector<std::vector<int64_t>> ops;                 // [rank][step]
  std::vector<std::string> errors;
};

SessionRun run_session(ThreadWorld& world, const std::vector<int64_t>& counts,
                       tidegate_session_options_t options, int steps, uint32_t seed,
                       const char* codec_of_last = nullptr) {
  SessionRun run;
  run.buffers.resize(world.size());
  run.ops.resize(world.size());
  run.errors.resize(world.size());
  world.run([&](int rank, tidegate_comm_t comm) {
    RankGradients g = make_gradients(counts, rank, 0);
    if (codec_of_last != nullptr) g.specs.back().codec = codec_of_last;
    tidegate_session_t session = nullptr;
    if (tidegate_session_create(comm, g.specs.data(), static_cast<int64_t>(g.specs.size()),
                                &options, &session) != TIDEGATE_OK) {
      run.errors[rank] = tidegate_last_error();
      return;
    }
    std::mt19937 rng(seed * 131 + static_cast<uint32_t>(rank));
    for (int step = 0; step < steps; ++step) {
      if (step > 0) {
        RankGradients fresh = make_gradients(counts, rank, step);
        for (size_t i = 0; i < counts.size(); ++i) g.buffers[i] = fresh.buffers[i];
      }
      std::vector<size_t> order(counts.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::thread backward([&] {
        for (size_t i : order) {
          EXPECT_EQ(tidegate_session_ready(session, g.specs[i].key), TIDEGATE_OK);
          if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
        }
      });
      backward.join();
      tidegate_session_stats_t stats{};
      if (tidegate_session_step(session, &stats) != TIDEGATE_OK) {
        run.errors[rank] = tidegate_last_error();
        break;
      }
      run.ops[rank].push_back(stats.ops);
    }
    run.buffers[rank] = g.buffers;
    EXPECT_EQ(tidegate_session_destroy(session), TIDEGATE_OK);
  });
  return run;
}

void expect_identical_across_ranks(const SessionRun& run) {
  for (size_t r = 1; r < run.buffers.size(); ++r) {
    ASSERT_EQ(run.buffers[r].size(), run.buffers[0].size());
    for (size_t i = 0; i < run.buffers[0].size(); ++i) {
      const auto& a = run.buffers[0][i];
      const auto& b = run.buffers[r][i];
      ASSERT_EQ(a.size(), b.size());
      // An empty gradient has no data pointer, which memcmp must not be given.
      EXPECT_TRUE(a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0)
          << "gradient " << i << " differs between rank 0 and rank " << r;
    }
    EXPECT_EQ(run.ops[r], run.ops[0]) << "rank " << r << " ran other ops than rank 0";
  }
}

TEST(Session, RandomReadinessOrdersGiveIdenticalResultsAndTheSameOps) {
  ThreadWorld& world = ThreadWorld::shared(4);
  tidegate_session_options_t options{};
  options.op = TIDEGATE_AVG;
  options.fusion_bytes = 16 << 10;
  options.chunk_bytes = 1 << 20;
  const std::vector<int64_t> counts = edge_counts();
  SessionRun run = run_session(world, counts, options, 3, 1);
  for (const std::string& e : run.errors) ASSERT_TRUE(e.empty()) << e;
  expect_identical_across_ranks(run);
  // The average itself, for an element of the cut gradient (tolerance: float sums).
  const size_t big = 2;
  double expected = 0;
  for (int r = 0; r < 4; ++r) expected += make_gradients(counts, r, 2).buffers[big][777];
  EXPECT_NEAR(run.buffers[0][big][777], expected / 4, 1e-5);
  EXPECT_GT(run.ops[0][0], 4);  // cut and fused, not one op per gradient
}

TEST(Session, FusedCutOrAloneADenseGradientGetsTheSameBits) {
  ThreadWorld& world = ThreadWorld::shared(4);
  const std::vector<int64_t> counts = edge_counts();
  tidegate_session_options_t fused{};
  fused.fusion_bytes = 64 << 10;
  fused.chunk_bytes = 256 << 10;
  tidegate_session_options_t alone{};
  alone.fusion_bytes = -1;
  alone.chunk_bytes = -1;
  SessionRun a = run_session(world, counts, fused, 1, 2);
  SessionRun b = run_session(world, counts, alone, 1, 3);
  for (const std::string& e : a.errors) ASSERT_TRUE(e.empty()) << e;
  for (const std::string& e : b.errors) ASSERT_TRUE(e.empty()) << e;
  EXPECT_GT(a.ops[0][0], b.ops[0][0] - 30);  // many fused away, the big ones cut
  for (size_t i = 0; i < counts.size(); ++i) {
    ASSERT_EQ(a.buffers[0][i].size(), b.buffers[0][i].size());
    EXPECT_TRUE(a.buffers[0][i].empty() ||  // no data pointer for memcmp when empty
                std::memcmp(a.buffers[0][i].data(), b.buffers[0][i].data(),
                            a.buffers[0][i].size() * sizeof(float)) == 0)
        << "gradient " << i << " (count " << counts[i] << ") differs fused/cut vs alone";
  }
}

TEST(Session, ACompressedGradientAmongDenseOnesIsIdenticalEverywhere) {
  ThreadWorld& world = ThreadWorld::shared(3);
  tidegate_session_options_t options{};
  SessionRun run = run_session(world, {100, 5000, 70000}, options, 2, 4, "fp16");
  for (const std::string& e : run.errors) ASSERT_TRUE(e.empty()) << e;
  expect_identical_across_ranks(run);
  double expected = 0;
  for (int r = 0; r < 3; ++r) expected += make_gradients({100, 5000, 70000}, r, 1).buffers[2][9];
  EXPECT_NEAR(run.buffers[0][2][9], expected, 5e-3);
}

TEST(Session, BackwardMarksOnOneThreadWhileForwardWaitsOnAnother) {
  ThreadWorld& world = ThreadWorld::shared(3);
  const std::vector<int64_t> counts = {3000, 1, 250000, 40, 9000};
  std::vector<std::vector<float>> finals(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    RankGradients g = make_gradients(counts, rank, 0);
    tidegate_session_t session = nullptr;
    ASSERT_EQ(tidegate_session_create(comm, g.specs.data(), 5, nullptr, &session), TIDEGATE_OK)
        << tidegate_last_error();
    for (int step = 0; step < 4; ++step) {
      std::thread backward([&] {  // last layer first, as backward produces them
        for (size_t i = counts.size(); i-- > 0;) {
          ASSERT_EQ(tidegate_session_ready(session, g.specs[i].key), TIDEGATE_OK);
        }
      });
      std::thread forward([&] {  // first layer first, as the next forward needs them
        for (size_t i = 0; i < counts.size(); ++i) {
          ASSERT_EQ(tidegate_session_wait(session, g.specs[i].key, 20000), TIDEGATE_OK)
              << tidegate_last_error();
        }
      });
      backward.join();
      forward.join();
      ASSERT_EQ(tidegate_session_wait_all(session, 20000), TIDEGATE_OK);
      ASSERT_EQ(tidegate_session_step(session, nullptr), TIDEGATE_OK) << tidegate_last_error();
    }
    finals[rank] = g.buffers[2];
    ASSERT_EQ(tidegate_session_destroy(session), TIDEGATE_OK);
  });
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(std::memcmp(finals[r].data(), finals[0].data(), finals[0].size() * 4), 0);
  }
}

TEST(Session, BadInputIsRefusedClearly) {
  ThreadWorld& world = ThreadWorld::shared(2);
  world.run([&](int rank, tidegate_comm_t comm) {
    RankGradients g = make_gradients({10, 20}, rank, 0);
    tidegate_session_t session = nullptr;
    g.specs[1].key = g.specs[0].key;
    EXPECT_EQ(tidegate_session_create(comm, g.specs.data(), 2, nullptr, &session),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tidegate_last_error()).find("registered twice"), std::string::npos);
    g.specs[1].key = 77;
    g.specs[1].codec = "qsgd:bits=99";
    EXPECT_EQ(tidegate_session_create(comm, g.specs.data(), 2, nullptr, &session),
              TIDEGATE_ERR_CONFIG);
    g.specs[1].codec = nullptr;
    tidegate_session_options_t options{};
    options.op = TIDEGATE_MAX;
    EXPECT_EQ(tidegate_session_create(comm, g.specs.data(), 2, &options, &session),
              TIDEGATE_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(tidegate_session_create(comm, g.specs.data(), 2, nullptr, &session), TIDEGATE_OK)
        << tidegate_last_error();
    EXPECT_EQ(tidegate_session_ready(session, 12345), TIDEGATE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tidegate_last_error()).find("12345"), std::string::npos);
    ASSERT_EQ(tidegate_session_ready(session, g.specs[0].key), TIDEGATE_OK);
    EXPECT_EQ(tidegate_session_ready(session, g.specs[0].key), TIDEGATE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tidegate_last_error()).find("twice"), std::string::npos);
    ASSERT_EQ(tidegate_session_ready(session, 77), TIDEGATE_OK);
    EXPECT_EQ(tidegate_session_step(session, nullptr), TIDEGATE_OK) << tidegate_last_error();
    EXPECT_EQ(tidegate_session_destroy(session), TIDEGATE_OK);
  });
}

TEST(Session, RanksThatRegisterDifferentGradientsGetAMismatchNamingTheField) {
  ThreadWorld& world = ThreadWorld::shared(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    RankGradients g = make_gradients({10, rank == 1 ? 21 : 20}, rank, 0);
    tidegate_session_t session = nullptr;
    EXPECT_EQ(tidegate_session_create(comm, g.specs.data(), 2, nullptr, &session),
              TIDEGATE_ERR_MISMATCH);
    const std::string error = tidegate_last_error();
    EXPECT_NE(error.find("'count'"), std::string::npos) << error;
    EXPECT_NE(error.find("key 501"), std::string::npos) << error;
  });
}

}  // namespace
}  // namespace tidegate::testing
