// A gradient marked ready on one rank only: with a short TIDEGATE_TIMEOUT_MS, the rank that
// marked it gets a MISMATCH naming the key within the deadline (not a hang), the ranks that did
// not are told which key they never marked when they end the step, and their sessions fail
// with the same named error. Its own binary: the deadline is set before the world is created.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.h"

namespace tidegate::testing {
namespace {

TEST(SessionErrors, AKeyMarkedOnOneRankOnlyIsANamedErrorOnEveryRank) {
  setenv("TIDEGATE_TIMEOUT_MS", "1500", 1);
  // The probe is not under test, and in the sanitizer builds (5-15x slower) it alone can
  // outlast this short deadline.
  setenv("TIDEGATE_PROBE", "off", 1);
  ThreadWorld world(3);
  std::atomic<int> finished{0};
  std::vector<std::string> errors(3);
  std::vector<double> seconds(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<float> a(100, 1.0f), b(50, 2.0f);
    tidegate_gradient_t specs[2] = {};
    specs[0].key = 41;
    specs[0].tensor = tidegate_host_tensor(a.data(), 100, TIDEGATE_FLOAT32);
    specs[1].key = 42;
    specs[1].tensor = tidegate_host_tensor(b.data(), 50, TIDEGATE_FLOAT32);
    tidegate_session_t session = nullptr;
    ASSERT_EQ(tidegate_session_create(comm, specs, 2, nullptr, &session), TIDEGATE_OK)
        << tidegate_last_error();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(tidegate_session_ready(session, 41), TIDEGATE_OK);
    if (rank == 0) {
      ASSERT_EQ(tidegate_session_ready(session, 42), TIDEGATE_OK);
    }
    ASSERT_EQ(tidegate_session_wait(session, 41, 10000), TIDEGATE_OK) << tidegate_last_error();
    EXPECT_EQ(a[7], 3.0f);
    if (rank == 0) {
      // Waits for the whole step: the key the others never mark ends it with a named error.
      EXPECT_EQ(tidegate_session_step(session, nullptr), TIDEGATE_ERR_MISMATCH);
      errors[rank] = tidegate_last_error();
    } else {
      EXPECT_EQ(tidegate_session_step(session, nullptr), TIDEGATE_ERR_INVALID_ARGUMENT);
      const std::string local = tidegate_last_error();
      EXPECT_NE(local.find("keys 42"), std::string::npos) << local;
      // The session itself fails too, at the same negotiation round as rank 0's.
      tidegate_status_t status = TIDEGATE_OK;
      const auto deadline = start + std::chrono::seconds(10);
      while (status != TIDEGATE_ERR_MISMATCH && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        status = tidegate_session_wait_all(session, 0);
      }
      errors[rank] = tidegate_last_error();
      EXPECT_EQ(status, TIDEGATE_ERR_MISMATCH) << errors[rank];
    }
    seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++finished;
    EXPECT_EQ(tidegate_session_destroy(session), TIDEGATE_OK);
  });
  EXPECT_EQ(finished.load(), 3);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NE(errors[r].find("key 42 on 1 of 3 ranks"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find(r == 0 ? "this rank: marked" : "this rank: not marked"),
              std::string::npos)
        << errors[r];
    EXPECT_LT(seconds[r], 1.5 * 3 + 2) << "the error came too late";
  }
}

}  // namespace
}  // namespace tidegate::testing
