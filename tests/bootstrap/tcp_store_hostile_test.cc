// The TCP store against clients that are wrong, silent, slow or hostile: each is refused or
// dropped within a bounded time, counted, and never delays a correct client.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "bootstrap/tcp_store_protocol.h"
#include "store_test_util.h"

namespace tidegate {
namespace {

using testing::connect_authenticated_raw;
using testing::connect_client;
using testing::connect_raw;
using testing::elapsed_ms;
using testing::read_until_closed;
using testing::start_server;

// A correct client can still set and read back a key, promptly.
void expect_server_serves(const TcpStoreServer& server) {
  const Clock::time_point start = Clock::now();
  auto store = connect_client(server);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("probe", "alive").is_ok());
  std::string value;
  ASSERT_TRUE(store->get("probe", Deadline::after_ms(5'000), &value).is_ok());
  EXPECT_EQ(value, "alive");
  EXPECT_LT(elapsed_ms(start), 2'000);
}

void write_bytes(int fd, const std::string& bytes) {
  Status st = write_full(fd, bytes.data(), bytes.size(), Deadline::after_ms(5'000), "test bytes");
  ASSERT_TRUE(st.is_ok()) << st.to_string();
}

TEST(TcpStoreHostile, WrongSecretIsRefusedAndTheServerKeepsServing) {
  auto server = start_server();
  std::unique_ptr<Store> store;
  Status st = connect_tcp_store(server->address(), Secret::from_text("not-the-secret"),
                                Deadline::after_ms(5'000), &store);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_AUTH) << st.to_string();
  EXPECT_NE(st.message().find(server->address()), std::string::npos) << st.message();
  EXPECT_EQ(store, nullptr);
  EXPECT_EQ(server->rejected_connections(), 1);
  expect_server_serves(*server);
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreHostile, ServerWithoutASecretDoesNotStart) {
  std::unique_ptr<TcpStoreServer> server;
  Status st = TcpStoreServer::start("127.0.0.1", 0, Secret(), &server);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_AUTH);
  EXPECT_EQ(server, nullptr);
}

TEST(TcpStoreHostile, GarbageOnThePortIsRefusedAtOnce) {
  auto server = start_server();
  UniqueFd raw = connect_raw(*server);
  const Clock::time_point start = Clock::now();
  write_bytes(raw.get(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string received;
  EXPECT_EQ(read_until_closed(raw.get(), Deadline::after_ms(5'000), &received).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_LT(elapsed_ms(start), 2'000);              // refused on the first bytes, not at a timeout
  EXPECT_EQ(received.size(), kAuthChallengeBytes);  // the challenge, and nothing more
  EXPECT_EQ(server->rejected_connections(), 1);
  expect_server_serves(*server);
}

TEST(TcpStoreHostile, HandshakeWithTheRightMagicButAForgedProofIsRefused) {
  auto server = start_server();
  UniqueFd raw = connect_raw(*server);
  std::string forged(kAuthMagic, kAuthMagicBytes);
  forged += std::string(kNonceBytes + kMacBytes, 'x');
  write_bytes(raw.get(), forged);
  EXPECT_EQ(read_until_closed(raw.get(), Deadline::after_ms(5'000)).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_EQ(server->rejected_connections(), 1);
  expect_server_serves(*server);
}

TEST(TcpStoreHostile, SilentClientDoesNotBlockOthers) {
  auto server = start_server();  // default 10 s handshake timeout: the silent ones stay
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(connect_raw(*server));
  expect_server_serves(*server);
  EXPECT_EQ(server->rejected_connections(), 0);
}

TEST(TcpStoreHostile, SilentClientIsDroppedAfterTheHandshakeTimeout) {
  TcpStoreServerOptions options;
  options.handshake_timeout = Milliseconds(200);
  auto server = start_server(options);
  const Clock::time_point start = Clock::now();
  UniqueFd raw = connect_raw(*server);
  EXPECT_EQ(read_until_closed(raw.get(), Deadline::after_ms(5'000)).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_GE(elapsed_ms(start), 190);
  EXPECT_LT(elapsed_ms(start), 3'000);
  EXPECT_EQ(server->rejected_connections(), 1);
  expect_server_serves(*server);
}

TEST(TcpStoreHostile, HalfARequestIsDroppedAfterTheRequestTimeout) {
  TcpStoreServerOptions options;
  options.request_timeout = Milliseconds(200);
  auto server = start_server(options);
  UniqueFd raw = connect_authenticated_raw(*server);
  const std::string request = encode_set_request("key", "value");
  const Clock::time_point start = Clock::now();
  write_bytes(raw.get(), request.substr(0, request.size() / 2));
  EXPECT_EQ(read_until_closed(raw.get(), Deadline::after_ms(5'000)).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_GE(elapsed_ms(start), 190);
  EXPECT_LT(elapsed_ms(start), 3'000);
  EXPECT_EQ(server->rejected_connections(), 1);
  // The half-set key was never stored.
  auto store = connect_client(*server);
  std::string value;
  EXPECT_EQ(store->get("key", Deadline::after_ms(100), &value).code(), TIDEGATE_ERR_TIMEOUT);
}

// Sends a hand-made request after a valid handshake and expects an error answer, then the
// connection closed, without the server waiting for the bytes the lengths announce.
void expect_refused_request(const TcpStoreServer& server, const std::string& request,
                            const std::string& expected_words) {
  UniqueFd raw = connect_authenticated_raw(server);
  write_bytes(raw.get(), request);
  std::string answer;
  EXPECT_EQ(read_until_closed(raw.get(), Deadline::after_ms(5'000), &answer).code(),
            TIDEGATE_ERR_PEER_FAILED);
  ASSERT_GE(answer.size(), kStoreResponseHeaderBytes);
  EXPECT_EQ(answer[0], kStoreResponseError);
  EXPECT_NE(answer.find(expected_words), std::string::npos) << answer.substr(5);
}

std::string le32(uint32_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

TEST(TcpStoreHostile, OversizeKeyOrValueLengthIsRefusedWithoutReadingIt) {
  auto server = start_server();
  const Clock::time_point start = Clock::now();
  expect_refused_request(*server, "S" + le32(kMaxStoreKeyBytes + 1), "key of 513 bytes");
  expect_refused_request(*server, "G" + le32(0xffffffffu), "exceeds the limit");
  expect_refused_request(*server, "S" + le32(1) + "k" + le32(0xffffffffu), "value of 4294967295");
  expect_refused_request(*server, "X", "unknown request kind");
  EXPECT_LT(elapsed_ms(start), 3'000);
  EXPECT_EQ(server->rejected_connections(), 4);
  expect_server_serves(*server);
}

TEST(TcpStoreHostile, ConnectionsBeyondTheLimitAreRefused) {
  TcpStoreServerOptions options;
  options.max_connections = 2;
  auto server = start_server(options);
  // Two authenticated connections fill the server: nothing can be dropped for a third.
  std::vector<UniqueFd> held;
  for (int i = 0; i < 2; ++i) held.push_back(connect_authenticated_raw(*server));
  UniqueFd extra = connect_raw(*server);
  std::string received;
  EXPECT_EQ(read_until_closed(extra.get(), Deadline::after_ms(5'000), &received).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_TRUE(received.empty());
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreHostile, AtTheLimitTheOldestUnauthenticatedConnectionMakesRoom) {
  TcpStoreServerOptions options;
  options.max_connections = 2;
  auto server = start_server(options);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(connect_raw(*server));
    // Reading the challenge proves the server accepted this connection.
    std::string challenge(kAuthChallengeBytes, '\0');
    ASSERT_TRUE(read_full(held.back().get(), challenge.data(), challenge.size(),
                          Deadline::after_ms(5'000), "challenge")
                    .is_ok());
  }
  expect_server_serves(*server);  // an honest client still gets in: the oldest silent one goes
  EXPECT_EQ(read_until_closed(held[0].get(), Deadline::after_ms(5'000)).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_EQ(server->rejected_connections(), 1);
}

TEST(TcpStoreHostile, StopReturnsPromptlyWithSilentAndWaitingClients) {
  auto server = start_server();
  UniqueFd silent = connect_raw(*server);
  auto waiter_store = connect_client(*server);
  auto waiter = std::async(std::launch::async, [&] {
    std::string value;
    return waiter_store->get("never", Deadline::after_ms(10'000), &value);
  });
  const Clock::time_point start = Clock::now();
  server->stop();
  EXPECT_LT(elapsed_ms(start), 1'000);
  Status st = waiter.get();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();  // failed fast, not at 10 s
  EXPECT_LT(elapsed_ms(start), 5'000);
}

}  // namespace
}  // namespace tidegate
