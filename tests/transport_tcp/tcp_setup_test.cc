// Connection set-up of the TCP transport: authentication, refusals, hostile clients on the
// listener, address choice. Also a disabled throughput measurement (run it by hand with
// --gtest_also_run_disabled_tests --gtest_filter='*Throughput*').
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "base/socket_util.h"
#include "tests/transport_tcp/tcp_test_util.h"

namespace tidegate::tcp_testing {
namespace {

using Handle = Transport::Handle;

TEST(TcpSetupTest, WrongSecretIsRefusedWithAnAuthError) {
  WorldOptions options;
  options.secret_of = [](int rank) { return rank == 1 ? "not-the-job-secret" : "tcp-test-secret"; };
  options.setup_timeout_ms_of = [](int rank) -> int64_t {
    return rank == 0 ? 2000 : kTestTimeoutMs;
  };
  TcpWorld world(2, options);
  EXPECT_EQ(world.statuses()[1].code(), TIDEGATE_ERR_AUTH) << world.statuses()[1].to_string();
  // Rank 0 refused the connection, kept listening, and says why it gave up.
  EXPECT_EQ(world.statuses()[0].code(), TIDEGATE_ERR_TIMEOUT) << world.statuses()[0].to_string();
  EXPECT_NE(world.statuses()[0].message().find("refused 1 connection"), std::string::npos)
      << world.statuses()[0].message();
}

TEST(TcpSetupTest, ConnectionFromAnotherCommunicatorIsRefused) {
  WorldOptions options;
  options.comm_id_of = [](int rank) -> uint64_t { return rank == 1 ? kCommId + 1 : kCommId; };
  options.setup_timeout_ms_of = [](int rank) -> int64_t {
    return rank == 0 ? 2000 : kTestTimeoutMs;
  };
  TcpWorld world(2, options);
  EXPECT_EQ(world.statuses()[1].code(), TIDEGATE_ERR_PROTOCOL) << world.statuses()[1].to_string();
  EXPECT_NE(world.statuses()[1].message().find("another communicator"), std::string::npos);
  EXPECT_EQ(world.statuses()[0].code(), TIDEGATE_ERR_TIMEOUT);
}

TEST(TcpSetupTest, DifferentStreamCountsAreAConfigError) {
  WorldOptions options;
  options.streams_of = [](int rank) { return rank == 1 ? 3 : 2; };
  options.setup_timeout_ms_of = [](int rank) -> int64_t {
    return rank == 0 ? 2000 : kTestTimeoutMs;
  };
  TcpWorld world(2, options);
  EXPECT_EQ(world.statuses()[1].code(), TIDEGATE_ERR_CONFIG) << world.statuses()[1].to_string();
  EXPECT_NE(world.statuses()[1].message().find("TIDEGATE_TCP_STREAMS"), std::string::npos);
}

// Reads until the server closes the connection (it must, after refusing us): an end of
// stream or a reset, not a timeout.
bool closed_by_server(int fd) {
  char buffer[256];
  Status st =
      read_full(fd, buffer, sizeof buffer, Deadline::after_ms(kTestTimeoutMs), "server reply");
  return st.code() == TIDEGATE_ERR_PEER_FAILED || st.code() == TIDEGATE_ERR_SYSTEM;
}

TEST(TcpSetupTest, GarbageOnTheListenerDoesNotDisturbSetUp) {
  MemoryStore store;
  WorldOptions options;
  RankInputs inputs[2];
  std::unique_ptr<Transport> transports[2];
  Status statuses[2];
  std::thread rank0([&] {
    statuses[0] = TcpWorld::create_rank(0, 2, options, &store, &inputs[0], &transports[0]);
  });

  std::string address, host;
  int port = 0;
  ASSERT_TRUE(store.get("tcp/0", Deadline::after_ms(kTestTimeoutMs), &address).is_ok());
  ASSERT_TRUE(parse_host_port(address, &host, &port).is_ok());
  {  // an HTTP client
    UniqueFd fd;
    ASSERT_TRUE(connect_tcp(host, port, Deadline::after_ms(kTestTimeoutMs), &fd).is_ok());
    const std::string junk = "GET / HTTP/1.0\r\nHost: x\r\n\r\n" + std::string(200, '\xff');
    ASSERT_TRUE(
        write_full(fd.get(), junk.data(), junk.size(), Deadline::after_ms(kTestTimeoutMs), "junk")
            .is_ok());
    EXPECT_TRUE(closed_by_server(fd.get()));
  }
  {  // a client that connects and leaves
    UniqueFd fd;
    ASSERT_TRUE(connect_tcp(host, port, Deadline::after_ms(kTestTimeoutMs), &fd).is_ok());
  }
  {  // a client that knows the secret but sends a garbage hello
    UniqueFd fd;
    ASSERT_TRUE(connect_tcp(host, port, Deadline::after_ms(kTestTimeoutMs), &fd).is_ok());
    const Secret secret = Secret::from_text("tcp-test-secret");
    ASSERT_TRUE(
        authenticate_client_side(fd.get(), secret, "tcp", Deadline::after_ms(kTestTimeoutMs))
            .is_ok());
    const std::string hello(32, 'z');
    ASSERT_TRUE(write_full(fd.get(), hello.data(), hello.size(), Deadline::after_ms(kTestTimeoutMs),
                           "hello")
                    .is_ok());
    EXPECT_TRUE(closed_by_server(fd.get()));
  }
  statuses[1] = TcpWorld::create_rank(1, 2, options, &store, &inputs[1], &transports[1]);
  rank0.join();
  ASSERT_TRUE(statuses[0].is_ok()) << statuses[0].to_string();
  ASSERT_TRUE(statuses[1].is_ok()) << statuses[1].to_string();

  std::vector<unsigned char> out = pattern(1, 0, 0, 777), in(777);
  Handle send = 0, recv = 0;
  ASSERT_TRUE(transports[1]->isend(0, 0, test_header(1, 0, 777), out.data(), 777, &send).is_ok());
  ASSERT_TRUE(transports[0]->irecv(1, 0, test_header(1, 0, 777), in.data(), 777, &recv).is_ok());
  run_ranks(2, [&](int rank) {
    std::vector<Status> r =
        wait_all(*transports[rank], {rank == 0 ? recv : send}, Deadline::after_ms(kTestTimeoutMs));
    EXPECT_TRUE(r[0].is_ok()) << r[0].to_string();
  });
  EXPECT_EQ(in, out);
}

// A store that, whenever a rank publishes its listener ("tcp/<rank>"), first opens `count`
// connections to it and holds them open without sending a byte (what a port scanner or a
// stalled attacker does), so they are queued on the port before any rank's own connection.
class SilentFloodStore : public Store {
 public:
  SilentFloodStore(Store* inner, int count) : inner_(inner), count_(count) {}

  Status set(const std::string& key, const std::string& value) override {
    if (key.rfind("tcp/", 0) == 0) {
      std::string host;
      int port = 0;
      TG_RETURN_IF_ERROR(parse_host_port(value, &host, &port));
      for (int i = 0; i < count_; ++i) {
        UniqueFd fd;
        TG_RETURN_IF_ERROR(connect_tcp(host, port, Deadline::after_ms(kTestTimeoutMs), &fd));
        std::lock_guard<std::mutex> lock(mutex_);
        held_.push_back(std::move(fd));
      }
    }
    return inner_->set(key, value);
  }
  Status get(const std::string& key, Deadline deadline, std::string* value) override {
    return inner_->get(key, deadline, value);
  }

 private:
  Store* inner_;
  const int count_;
  std::mutex mutex_;
  std::vector<UniqueFd> held_;
};

// Seconds 4 ranks take to connect under a 5 s deadline, with `silent` connections held open on
// every rank's listener; every rank's status in *statuses.
double seconds_to_set_up(int silent, std::vector<Status>* statuses) {
  constexpr int kRanks = 4;
  MemoryStore memory;
  SilentFloodStore store(&memory, silent);
  WorldOptions options;
  options.timeout_ms = 5000;
  std::vector<RankInputs> inputs(kRanks);
  std::vector<std::unique_ptr<Transport>> transports(kRanks);
  statuses->assign(kRanks, Status::ok());
  const auto start = Clock::now();
  run_ranks(kRanks, [&](int rank) {
    (*statuses)[rank] =
        TcpWorld::create_rank(rank, kRanks, options, &store, &inputs[rank], &transports[rank]);
  });
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(TcpSetupTest, SilentConnectionsOnEveryListenerDoNotDelaySetUp) {
  std::vector<Status> statuses;
  const double quiet = seconds_to_set_up(0, &statuses);
  for (const Status& st : statuses) ASSERT_TRUE(st.is_ok()) << st.to_string();
  const double flooded = seconds_to_set_up(10, &statuses);
  for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_LT(flooded, quiet + 2.0) << "quiet: " << quiet << " s, flooded: " << flooded << " s";
}

TEST(TcpSetupTest, SingleRankNeedsNoConnections) {
  TcpWorld world(1);
  ASSERT_TRUE(world.all_ok()) << world.statuses()[0].to_string();
  bool activity = true;
  EXPECT_TRUE(world.transport(0).progress(Milliseconds(0), &activity).is_ok());
  EXPECT_FALSE(activity);
  EXPECT_TRUE(world.transport(0).close(Deadline::after_ms(1000)).is_ok());
}

Status bind_host_for(const std::string& variable, const std::string& value,
                     const std::string& advertise, std::string* host) {
  Config config;
  TG_RETURN_IF_ERROR(config.set(variable, value));
  TransportContext context;
  context.config = &config;
  context.advertise_host = advertise;
  return tcp::choose_bind_host(context, host);
}

TEST(TcpSetupTest, BindAddressFollowsTheConfiguration) {
  std::string host;
  ASSERT_TRUE(bind_host_for("TIDEGATE_TCP_ADDR", "auto", "", &host).is_ok());
  EXPECT_EQ(host, "127.0.0.1");
  ASSERT_TRUE(bind_host_for("TIDEGATE_TCP_ADDR", "auto", "10.1.2.3", &host).is_ok());
  EXPECT_EQ(host, "10.1.2.3");
  ASSERT_TRUE(bind_host_for("TIDEGATE_TCP_ADDR", "127.0.0.2", "10.1.2.3", &host).is_ok());
  EXPECT_EQ(host, "127.0.0.2");
  ASSERT_TRUE(bind_host_for("TIDEGATE_TCP_IFACE", "lo", "10.1.2.3", &host).is_ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(bind_host_for("TIDEGATE_TCP_ADDR", "0.0.0.0", "", &host).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(bind_host_for("TIDEGATE_TCP_IFACE", "no-such-if0", "", &host).code(),
            TIDEGATE_ERR_CONFIG);
}

// Not a test: prints the loopback throughput of one 64 MiB message for 1, 2 and 4 streams.
TEST(TcpSetupTest, DISABLED_Throughput64MiB) {
  const size_t bytes = size_t{64} << 20;
  for (int streams : {1, 2, 4}) {
    WorldOptions options;
    options.streams = streams;
    TcpWorld world(2, options);
    ASSERT_TRUE(world.all_ok());
    std::vector<unsigned char> data(bytes, 7), got(bytes);
    double best_gbps = 0;
    for (int round = 0; round < 6; ++round) {
      const auto start = Clock::now();
      run_ranks(2, [&](int rank) {
        Handle h = 0;
        Transport& t = world.transport(rank);
        Status posted = rank == 0
                            ? t.isend(1, 0, test_header(0, round, bytes), data.data(), bytes, &h)
                            : t.irecv(0, 0, test_header(0, round, bytes), got.data(), bytes, &h);
        ASSERT_TRUE(posted.is_ok());
        EXPECT_TRUE(wait_all(t, {h}, Deadline::after_ms(kTestTimeoutMs))[0].is_ok());
      });
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      best_gbps = std::max(best_gbps, static_cast<double>(bytes) / seconds / 1e9);
    }
    EXPECT_EQ(got, data);
    std::printf("tcp loopback, 64 MiB, %d stream(s): best of 6 = %.2f GB/s\n", streams, best_gbps);
  }
}

// Not a test: prints the round-trip time of 8-byte messages (ping-pong between two ranks).
TEST(TcpSetupTest, DISABLED_SmallMessageRoundTrip) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  constexpr int kRounds = 2000;
  uint64_t value = 0;
  const auto start = Clock::now();
  run_ranks(2, [&](int rank) {
    Transport& t = world.transport(rank);
    uint64_t mine = 0;
    for (int round = 0; round < kRounds; ++round) {
      Handle h = 0;
      const bool sending = (round % 2) == rank;
      Status posted = sending ? t.isend(1 - rank, 0, test_header(rank, round, 8), &mine, 8, &h)
                              : t.irecv(1 - rank, 0, test_header(1 - rank, round, 8), &mine, 8, &h);
      ASSERT_TRUE(posted.is_ok());
      ASSERT_TRUE(wait_all(t, {h}, Deadline::after_ms(kTestTimeoutMs))[0].is_ok());
      if (!sending) ++mine;
    }
    if (rank == 1) value = mine;
  });
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  EXPECT_GT(value, 0u);
  std::printf("tcp loopback, 8-byte ping-pong: %.1f us per round trip\n", us / (kRounds / 2));
}

}  // namespace
}  // namespace tidegate::tcp_testing
