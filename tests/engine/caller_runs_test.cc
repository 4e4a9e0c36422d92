// A blocking caller runs its op on its own thread (ProgressEngine::wait_running, "Who drives"
// in progress_engine.h), on N ranks as threads over the loopback transport: ops of a caller
// that waits right after posting complete on the caller's thread once the progress thread
// parks, and never with TIDEGATE_CALLER_RUNS=0; a caller that drives also runs the other ops
// in the window in posting order; results stay bitwise identical whoever drove; and a caller
// driving an op its peers never post gets the op's named timeout, or an abort from another
// thread, rather than waiting forever.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "engine_world.h"

namespace tidegate::testing {
namespace {

Config caller_runs_config(bool caller_runs, int64_t timeout_ms = 20000) {
  return make_config({{"TIDEGATE_OPS_IN_FLIGHT", "4"},
                      {"TIDEGATE_TIMEOUT_MS", std::to_string(timeout_ms)},
                      {"TIDEGATE_CALLER_RUNS", caller_runs ? "1" : "0"}});
}

// Every rank posts kOps blocking allreduces back to back; counts, per rank, the ops whose
// completion ran on the posting thread, and checks the sums and that every rank holds the same
// bits.
int ops_completed_on_caller(bool caller_runs) {
  constexpr int kRanks = 3;
  constexpr int kOps = 40;
  EngineWorld world(kRanks, caller_runs_config(caller_runs));
  std::vector<std::vector<std::vector<float>>> data(
      kRanks, std::vector<std::vector<float>>(kOps, std::vector<float>(33)));
  std::atomic<int> on_caller{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      const std::thread::id me = std::this_thread::get_id();
      for (int op = 0; op < kOps; ++op) {
        std::vector<float>& values = data[r][op];
        for (size_t i = 0; i < values.size(); ++i) {
          values[i] = 0.1f * static_cast<float>(r + 1) + static_cast<float>(op) + i * 1e-3f;
        }
        auto request = std::make_shared<Request>(allreduce_args(op, values, 33));
        request->on_complete([&, me](const Status&) {
          if (std::this_thread::get_id() == me) ++on_caller;
        });
        ASSERT_TRUE(world.engine(r).post(request, /*caller_waits=*/true).is_ok());
        const Status status = world.engine(r).wait_running(request);
        ASSERT_TRUE(status.is_ok()) << status.to_string();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int op = 0; op < kOps; ++op) {
    const float expected = 0.6f + 3.0f * static_cast<float>(op) + 3 * 5e-3f;
    EXPECT_NEAR(data[0][op][5], expected, 1e-3) << "op " << op;
    for (int r = 1; r < kRanks; ++r) {
      EXPECT_EQ(std::memcmp(data[r][op].data(), data[0][op].data(), 33 * sizeof(float)), 0)
          << "rank " << r << " op " << op << " differs from rank 0";
    }
  }
  return on_caller.load();
}

TEST(CallerRuns, BlockingOpsRunOnTheCallersThreadOnlyWhenEnabled) {
  // The first op of each rank finds the progress thread watching the transports, so the thread
  // runs it; after an op it parks, and the next blocking calls run on their callers. A loaded
  // machine can delay a caller past the park, so only "some" is asserted, not "all but one".
  EXPECT_GT(ops_completed_on_caller(true), 0);
  EXPECT_EQ(ops_completed_on_caller(false), 0);
}

TEST(CallerRuns, ADrivingCallerCompletesEarlierOpsInPostingOrder) {
  constexpr int kRanks = 3;
  constexpr int kOps = 9;  // eight non-blocking ops, then one blocking op
  EngineWorld world(kRanks, caller_runs_config(true));
  std::vector<std::vector<std::vector<float>>> data(
      kRanks, std::vector<std::vector<float>>(kOps, std::vector<float>(1000)));
  std::vector<std::vector<int>> order(kRanks);
  std::mutex order_mutex;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::shared_ptr<Request>> requests;
      for (int op = 0; op < kOps; ++op) {
        // Large and small alternate, so that later ops could finish first.
        const int64_t count = op % 2 == 0 ? 1000 : 3;
        for (int64_t i = 0; i < count; ++i) data[r][op][i] = static_cast<float>(r * 7 + op + i);
        auto request = std::make_shared<Request>(allreduce_args(op, data[r][op], count));
        request->on_complete([&, r, op](const Status& status) {
          EXPECT_TRUE(status.is_ok()) << status.to_string();
          std::lock_guard<std::mutex> lock(order_mutex);
          order[r].push_back(op);
        });
        const bool last = op == kOps - 1;
        ASSERT_TRUE(world.engine(r).post(request, last).is_ok());
        requests.push_back(request);
      }
      ASSERT_TRUE(world.engine(r).wait_running(requests.back()).is_ok());
      for (auto& request : requests) {
        ASSERT_TRUE(request->wait(Deadline::after_ms(30000)).is_ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(order[r].size(), static_cast<size_t>(kOps));
    for (int op = 0; op < kOps; ++op) EXPECT_EQ(order[r][op], op) << "rank " << r;
    for (int op = 0; op < kOps; ++op) {
      EXPECT_EQ(std::memcmp(data[r][op].data(), data[0][op].data(), 1000 * sizeof(float)), 0)
          << "rank " << r << " op " << op;
      EXPECT_EQ(data[r][op][2], static_cast<float>(0 + 7 + 14 + 3 * (op + 2)));
    }
  }
}

// Op #0 on both ranks of a two-rank world, so that rank 0's progress thread parks and rank 0's
// caller drives the next op.
void warm_up(EngineWorld& world) {
  std::vector<std::vector<float>> data(2, std::vector<float>(8, 1.0f));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto request = std::make_shared<Request>(allreduce_args(0, data[r], 8));
      ASSERT_TRUE(world.engine(r).post(request, true).is_ok());
      ASSERT_TRUE(world.engine(r).wait_running(request).is_ok());
    });
  }
  for (auto& t : threads) t.join();
}

TEST(CallerRuns, ADrivingCallerGetsTheOpsTimeoutWhenPeersNeverPost) {
  EngineWorld world(2, caller_runs_config(true, 600));
  std::vector<float> lonely(8, 1.0f);
  warm_up(world);
  auto request = std::make_shared<Request>(allreduce_args(1, lonely, 8));
  ASSERT_TRUE(world.engine(0).post(request, true).is_ok());
  const auto start = std::chrono::steady_clock::now();
  const Status status = world.engine(0).wait_running(request);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status.code(), TIDEGATE_ERR_TIMEOUT) << status.to_string();
  EXPECT_NE(status.message().find("op #1"), std::string::npos) << status.to_string();
  EXPECT_LT(seconds, 10.0);
}

TEST(CallerRuns, AnAbortFromAnotherThreadEndsADrivingCallersWait) {
  EngineWorld world(2, caller_runs_config(true, 60000));
  std::vector<float> lonely(8, 1.0f);
  warm_up(world);
  auto request = std::make_shared<Request>(allreduce_args(1, lonely, 8));
  ASSERT_TRUE(world.engine(0).post(request, true).is_ok());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    world.engine(0).abort(aborted_error("the test aborts rank 0"));
  });
  const auto start = std::chrono::steady_clock::now();
  const Status status = world.engine(0).wait_running(request);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(status.code(), TIDEGATE_ERR_ABORTED) << status.to_string();
  EXPECT_NE(status.message().find("the test aborts rank 0"), std::string::npos)
      << status.to_string();
  EXPECT_LT(seconds, 10.0);
}

// A driving caller completes ops up to its own and stops: the callback of an op posted after it
// (another thread's, say, whose callback could take a lock the caller holds) runs elsewhere.
TEST(CallerRuns, ADrivingCallerDoesNotRunCallbacksOfLaterOps) {
  constexpr int kRounds = 30;
  EngineWorld world(2, caller_runs_config(true));
  std::vector<std::vector<float>> data(2, std::vector<float>(16, 1.0f));
  std::vector<std::vector<float>> later(2, std::vector<float>(16, 1.0f));
  std::atomic<int> later_on_caller{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const std::thread::id me = std::this_thread::get_id();
      uint64_t seq = 0;
      for (int round = 0; round < kRounds; ++round) {
        auto mine = std::make_shared<Request>(allreduce_args(seq++, data[r], 16));
        auto next = std::make_shared<Request>(allreduce_args(seq++, later[r], 16));
        next->on_complete([&, me](const Status&) {
          if (std::this_thread::get_id() == me) ++later_on_caller;
        });
        ASSERT_TRUE(world.engine(r).post(mine, true).is_ok());
        ASSERT_TRUE(world.engine(r).post(next).is_ok());
        ASSERT_TRUE(world.engine(r).wait_running(mine).is_ok());
        // The later op's callback may run on this thread only once it waits on nothing else:
        // here it must not have, so wait for it elsewhere.
        ASSERT_TRUE(next->wait(Deadline::after_ms(30000)).is_ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(later_on_caller.load(), 0);
}

// A blocking call from the thread that drives the engine (here: inside a completion callback)
// would wait for an op only that thread could run: refused at once, naming the cause.
TEST(CallerRuns, ABlockingCallInsideACallbackIsRefusedNotAHang) {
  EngineWorld world(2, caller_runs_config(true));
  std::vector<std::vector<float>> data(2, std::vector<float>(16, 1.0f));
  std::vector<std::vector<float>> inner(2, std::vector<float>(16, 1.0f));
  std::vector<Status> refused(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto request = std::make_shared<Request>(allreduce_args(0, data[r], 16));
      request->on_complete([&, r](const Status&) {
        auto nested = std::make_shared<Request>(allreduce_args(1, inner[r], 16));
        refused[r] = world.engine(r).post(nested, /*caller_waits=*/true);
      });
      ASSERT_TRUE(world.engine(r).post(request).is_ok());
      ASSERT_TRUE(request->wait(Deadline::after_ms(30000)).is_ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(refused[r].code(), TIDEGATE_ERR_INVALID_ARGUMENT) << refused[r].to_string();
    EXPECT_NE(refused[r].message().find("callback"), std::string::npos) << refused[r].to_string();
  }
}

}  // namespace
}  // namespace tidegate::testing
