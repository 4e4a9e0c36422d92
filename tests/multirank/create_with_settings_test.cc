// tidegate_comm_create_with_settings: settings passed by a host framework (the PyTorch backend
// passes its process group's timeout) win over the environment, and bad settings are refused
// before any rendezvous with an error naming the variable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.hpp"

namespace tidegate::testing {
namespace {

TEST(CreateWithSettings, TimeoutSettingWinsOverTheEnvironment) {
  setenv("TIDEGATE_TIMEOUT_MS", "600000", 1);  // ten minutes: the test would hang on it
  // The probe is not under test, and in the sanitizer builds (5-15x slower) it alone can
  // outlast the 1 s deadline of the settings.
  setenv("TIDEGATE_PROBE", "off", 1);
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  const tidegate_setting_t settings[] = {{"TIDEGATE_TIMEOUT_MS", "1000"}};
  std::vector<tidegate_comm_t> comms(2, nullptr);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        EXPECT_EQ(tidegate_comm_create_with_settings(r, 2, &callbacks, settings, 1, &comms[r]),
                  TIDEGATE_OK)
            << tidegate_last_error();
      });
    }
    for (auto& t : threads) t.join();
  }
  unsetenv("TIDEGATE_TIMEOUT_MS");
  unsetenv("TIDEGATE_PROBE");
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);

  // Rank 1 never posts: rank 0's allreduce must fail after the 1 s setting, not 10 minutes.
  std::vector<float> data(16, 1.0f);
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), 16, TIDEGATE_FLOAT32);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(tidegate_allreduce(comms[0], &t, &t, TIDEGATE_SUM), TIDEGATE_ERR_TIMEOUT)
      << tidegate_last_error();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0);
  EXPECT_GE(seconds, 0.9);
  std::thread other([&] { tidegate_comm_destroy(comms[1]); });
  tidegate_comm_destroy(comms[0]);
  other.join();
}

TEST(CreateWithSettings, UnknownVariableIsAConfigErrorNamingIt) {
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  const tidegate_setting_t settings[] = {{"TIDEGATE_NO_SUCH_KNOB", "1"}};
  tidegate_comm_t comm = nullptr;
  EXPECT_EQ(tidegate_comm_create_with_settings(0, 2, &callbacks, settings, 1, &comm),
            TIDEGATE_ERR_CONFIG);
  EXPECT_NE(std::string(tidegate_last_error()).find("TIDEGATE_NO_SUCH_KNOB"), std::string::npos)
      << tidegate_last_error();
  EXPECT_EQ(comm, nullptr);
}

TEST(CreateWithSettings, MalformedValueIsAConfigErrorNamingTheVariable) {
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  const tidegate_setting_t settings[] = {{"TIDEGATE_TIMEOUT_MS", "soon"}};
  tidegate_comm_t comm = nullptr;
  EXPECT_EQ(tidegate_comm_create_with_settings(0, 2, &callbacks, settings, 1, &comm),
            TIDEGATE_ERR_CONFIG);
  const std::string message = tidegate_last_error();
  EXPECT_NE(message.find("TIDEGATE_TIMEOUT_MS"), std::string::npos) << message;
  EXPECT_NE(message.find("soon"), std::string::npos) << message;
}

TEST(CreateWithSettings, NullArgumentsAreRefused) {
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  tidegate_comm_t comm = nullptr;
  EXPECT_EQ(tidegate_comm_create_with_settings(0, 2, &callbacks, nullptr, 1, &comm),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  const tidegate_setting_t null_value[] = {{"TIDEGATE_TIMEOUT_MS", nullptr}};
  EXPECT_EQ(tidegate_comm_create_with_settings(0, 2, &callbacks, null_value, 1, &comm),
            TIDEGATE_ERR_INVALID_ARGUMENT);
}

TEST(CreateWithSettings, CxxWrapperThrowsTheConfigError) {
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  try {
    Communicator::with_store(0, 2, callbacks, {{"TIDEGATE_SPIN_US", "-3"}});
    FAIL() << "a negative TIDEGATE_SPIN_US was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TIDEGATE_ERR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("TIDEGATE_SPIN_US"), std::string::npos) << e.what();
  }
}

// Three ranks created concurrently, rank 1 with `odd` added to the settings all share; returns
// each rank's creation status and error, and destroys what was created.
struct Created {
  tidegate_status_t status = TIDEGATE_OK;
  std::string error;
};
std::vector<Created> create_three(const tidegate_setting_t& odd, const tidegate_setting_t& usual) {
  MemoryStore store;
  const tidegate_store_t callbacks = ThreadWorld::callbacks(&store);
  std::vector<Created> created(3);
  std::vector<tidegate_comm_t> comms(3, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      // The probe is not under test; the deadline is long for the sanitizer builds.
      const tidegate_setting_t settings[] = {
          {"TIDEGATE_PROBE", "off"}, {"TIDEGATE_TIMEOUT_MS", "20000"}, r == 1 ? odd : usual};
      created[r].status =
          tidegate_comm_create_with_settings(r, 3, &callbacks, settings, 3, &comms[r]);
      if (created[r].status != TIDEGATE_OK) created[r].error = tidegate_last_error();
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  for (tidegate_comm_t comm : comms) {
    if (comm != nullptr) threads.emplace_back([comm] { tidegate_comm_destroy(comm); });
  }
  for (auto& t : threads) t.join();
  return created;
}

// Settings that shape the ops (api/settings_agreement.h): one rank's different value is a
// CONFIG error naming the setting on every rank, at creation, instead of ops that do not match.
TEST(CreateWithSettings, ASettingThatShapesTheOpsMustAgreeOnEveryRank) {
  const tidegate_setting_t cases[][2] = {
      {{"TIDEGATE_OPS_IN_FLIGHT", "1"}, {"TIDEGATE_OPS_IN_FLIGHT", "4"}},
      {{"TIDEGATE_SEGMENT_BYTES", "64K"}, {"TIDEGATE_SEGMENT_BYTES", "1M"}},
      {{"TIDEGATE_REPLAN_INTERVAL", "0"}, {"TIDEGATE_REPLAN_INTERVAL", "64"}},
      {{"TIDEGATE_ALGO", "allreduce=ring"}, {"TIDEGATE_ALGO", ""}},
      {{"TIDEGATE_SEED", "7"}, {"TIDEGATE_SEED", "0"}},
      {{"TIDEGATE_FUSION_BYTES", "off"}, {"TIDEGATE_FUSION_BYTES", "auto"}},
  };
  for (const auto& c : cases) {
    const std::vector<Created> created = create_three(c[0], c[1]);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(created[r].status, TIDEGATE_ERR_CONFIG)
          << c[0].name << ", rank " << r << ": " << created[r].error;
      EXPECT_NE(created[r].error.find(c[0].name), std::string::npos) << created[r].error;
      EXPECT_NE(created[r].error.find("differs between the ranks"), std::string::npos)
          << created[r].error;
    }
  }
}

// The same value written two ways agrees: numeric settings are compared as parsed.
TEST(CreateWithSettings, TheSameValueWrittenDifferentlyAgrees) {
  const std::vector<Created> created =
      create_three({"TIDEGATE_SEGMENT_BYTES", "1048576"}, {"TIDEGATE_SEGMENT_BYTES", "1M"});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(created[r].status, TIDEGATE_OK) << "rank " << r << ": " << created[r].error;
  }
}

}  // namespace
}  // namespace tidegate::testing
