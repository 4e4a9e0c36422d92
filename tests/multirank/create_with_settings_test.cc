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

}  // namespace
}  // namespace tidegate::testing
