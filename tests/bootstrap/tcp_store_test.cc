// The TCP store with well-behaved clients: round trips, waiting gets, timeouts, many clients
// at once, and a client that outlives its connection.
#include <gtest/gtest.h>

#include <future>
#include <thread>
#include <vector>

#include "store_test_util.h"

namespace tidegate {
namespace {

using testing::connect_authenticated_raw;
using testing::connect_client;
using testing::elapsed_ms;
using testing::read_until_closed;
using testing::start_server;
using testing::test_secret;

TEST(TcpStore, SetThenGetRoundTripsBinaryValues) {
  auto server = start_server();
  auto store = connect_client(*server);
  const std::string binary("a\0b\xff", 4);
  ASSERT_TRUE(store->set("binary", binary).is_ok());
  ASSERT_TRUE(store->set("empty", "").is_ok());
  std::string value = "junk";
  ASSERT_TRUE(store->get("binary", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, binary);
  ASSERT_TRUE(store->get("empty", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, "");
}

TEST(TcpStore, SetOverwritesAndOtherClientsSeeTheNewValue) {
  auto server = start_server();
  auto writer = connect_client(*server);
  auto reader = connect_client(*server);
  ASSERT_TRUE(writer->set("k", "one").is_ok());
  ASSERT_TRUE(writer->set("k", "two").is_ok());
  std::string value;
  ASSERT_TRUE(reader->get("k", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, "two");
}

TEST(TcpStore, LargestValueRoundTrips) {
  auto server = start_server();
  auto store = connect_client(*server);
  std::string big(kMaxStoreValueBytes, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  const std::string key(kMaxStoreKeyBytes, 'k');
  ASSERT_TRUE(store->set(key, big).is_ok());
  std::string value;
  ASSERT_TRUE(store->get(key, Deadline::after_ms(10'000), &value).is_ok());
  EXPECT_EQ(value, big);
}

TEST(TcpStore, GetWaitsUntilAnotherClientSets) {
  auto server = start_server();
  auto getter_store = connect_client(*server);
  auto setter_store = connect_client(*server);
  auto getter = std::async(std::launch::async, [&] {
    std::string value;
    Status st = getter_store->get("late", Deadline::after_ms(10'000), &value);
    return std::make_pair(st, value);
  });
  // Nothing has set the key yet, so the get cannot have succeeded.
  EXPECT_EQ(getter.wait_for(Milliseconds(0)), std::future_status::timeout);
  ASSERT_TRUE(setter_store->set("late", "arrived").is_ok());
  auto [st, value] = getter.get();
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(value, "arrived");
}

TEST(TcpStore, GetOfMissingKeyTimesOutAtItsDeadline) {
  auto server = start_server();
  auto store = connect_client(*server);
  const Clock::time_point start = Clock::now();
  std::string value = "untouched";
  Status st = store->get("never-set", Deadline::after_ms(300), &value);
  const int64_t elapsed = elapsed_ms(start);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();
  EXPECT_NE(st.message().find("never-set"), std::string::npos) << st.message();
  EXPECT_EQ(value, "untouched");
  EXPECT_GE(elapsed, 300);
  EXPECT_LT(elapsed, 2'000);
  // The connection is still usable after a timeout.
  ASSERT_TRUE(store->set("after", "ok").is_ok());
}

TEST(TcpStore, ClientAsksAgainWhenTheServerCapsTheWait) {
  TcpStoreServerOptions options;
  options.max_get_wait_ms = 40;
  auto server = start_server(options);
  auto store = connect_client(*server);
  const Clock::time_point start = Clock::now();
  std::string value;
  Status st = store->get("never-set", Deadline::after_ms(300), &value);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT);
  EXPECT_GE(elapsed_ms(start), 300);  // not the server's 40 ms cap
  EXPECT_LT(elapsed_ms(start), 2'000);
}

TEST(TcpStore, OversizeKeyOrValueIsRefusedBeforeTheWire) {
  auto server = start_server();
  auto store = connect_client(*server);
  const std::string long_key(kMaxStoreKeyBytes + 1, 'k');
  EXPECT_EQ(store->set(long_key, "v").code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  std::string value;
  EXPECT_EQ(store->get(long_key, Deadline::after_ms(100), &value).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  Status st = store->set("k", std::string(kMaxStoreValueBytes + 1, 'v'));
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("'k'"), std::string::npos) << st.message();
  EXPECT_TRUE(store->set("k", "fine").is_ok());
  EXPECT_EQ(server->rejected_connections(), 0);
}

TEST(TcpStore, SixteenConcurrentClientsEachSetAndWaitForANeighbour) {
  auto server = start_server();
  constexpr int kClients = 16;
  std::vector<std::future<Status>> results;
  for (int i = 0; i < kClients; ++i) {
    results.push_back(std::async(std::launch::async, [&server, i]() -> Status {
      std::unique_ptr<Store> store;
      TG_RETURN_IF_ERROR(
          connect_tcp_store(server->address(), test_secret(), Deadline::after_ms(10'000), &store));
      TG_RETURN_IF_ERROR(store->set("rank" + std::to_string(i), "value" + std::to_string(i)));
      const int neighbour = (i + 1) % kClients;
      std::string value;
      TG_RETURN_IF_ERROR(
          store->get("rank" + std::to_string(neighbour), Deadline::after_ms(10'000), &value));
      if (value != "value" + std::to_string(neighbour))
        return internal_error("wrong value " + value);
      return Status::ok();
    }));
  }
  for (auto& result : results) {
    Status st = result.get();
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
}

TEST(TcpStore, ClientReconnectsAfterTheServerDroppedItsIdleConnection) {
  TcpStoreServerOptions options;
  options.idle_timeout = Milliseconds(150);
  auto server = start_server(options);
  auto store = connect_client(*server);
  ASSERT_TRUE(store->set("before", "1").is_ok());
  // A probe connection that became idle after the client's last answer is dropped no earlier
  // than the client's: once the probe sees its close, the client's connection is gone too.
  UniqueFd probe = connect_authenticated_raw(*server);
  EXPECT_EQ(read_until_closed(probe.get(), Deadline::after_ms(5'000)).code(),
            TIDEGATE_ERR_PEER_FAILED);
  ASSERT_TRUE(store->set("after", "2").is_ok());
  std::string value;
  ASSERT_TRUE(store->get("before", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, "1");
  EXPECT_EQ(server->rejected_connections(), 0);  // idleness is not a refusal
}

TEST(TcpStore, ClientReconnectsToARestartedServer) {
  auto first = start_server();
  std::string host;
  int port = 0;
  ASSERT_TRUE(parse_host_port(first->address(), &host, &port).is_ok());
  auto store = connect_client(*first);
  ASSERT_TRUE(store->set("k", "v").is_ok());
  first->stop();
  std::unique_ptr<TcpStoreServer> second;
  ASSERT_TRUE(TcpStoreServer::start(host, port, test_secret(), &second).is_ok());
  ASSERT_TRUE(store->set("k", "again").is_ok());
  std::string value;
  ASSERT_TRUE(store->get("k", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, "again");
}

TEST(TcpStore, StopIsIdempotentAndFreesThePort) {
  auto server = start_server();
  const std::string address = server->address();
  server->stop();
  server->stop();
  std::unique_ptr<Store> store;
  Status st = connect_tcp_store(address, test_secret(), Deadline::after_ms(200), &store);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();
}

TEST(TcpStore, ConnectWithoutServerTimesOutNamingTheAddress) {
  auto server = start_server();
  const std::string address = server->address();
  server.reset();  // the destructor stops it
  const Clock::time_point start = Clock::now();
  std::unique_ptr<Store> store;
  Status st = connect_tcp_store(address, test_secret(), Deadline::after_ms(300), &store);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT);
  EXPECT_NE(st.message().find(address), std::string::npos) << st.message();
  EXPECT_GE(elapsed_ms(start), 290);
  EXPECT_LT(elapsed_ms(start), 2'000);
}

}  // namespace
}  // namespace tidegate
