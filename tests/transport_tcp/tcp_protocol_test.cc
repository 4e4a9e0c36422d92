// The protocol paths of the TCP transport: eager backpressure, the rendezvous in both
// orders, the receive-side header check, and argument checks.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/transport_tcp/tcp_test_util.h"

namespace tidegate::tcp_testing {
namespace {

using Handle = Transport::Handle;

uint64_t total_written(const tcp::TcpPeerStats& stats) {
  return std::accumulate(stats.bytes_written.begin(), stats.bytes_written.end(), uint64_t{0});
}

bool all_ok(const std::vector<Status>& results) {
  for (const Status& s : results) {
    if (!s.is_ok()) return false;
  }
  return true;
}

// Eager messages sent long before their receives: the receiver keeps up to its cap, then
// stops reading (parks) instead of buffering more; everything arrives once receives post.
TEST(TcpProtocolTest, UnexpectedSmallMessagesAreBoundedByBackpressure) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Transport& t0 = world.transport(0);
  Transport& t1 = world.transport(1);
  constexpr size_t kMessages = 600;  // 75 MiB of eager messages, twice the cap
  const size_t bytes = tcp::kEagerMaxBytes;
  std::vector<std::vector<unsigned char>> outgoing(kMessages), incoming(kMessages);
  std::vector<Handle> sends(kMessages), recvs(kMessages);
  for (size_t i = 0; i < kMessages; ++i) {
    outgoing[i] = pattern(0, 1, i, bytes);
    ASSERT_TRUE(
        t0.isend(1, 0, test_header(0, i, bytes), outgoing[i].data(), bytes, &sends[i]).is_ok());
  }
  ASSERT_TRUE(pump_until(
                  {&t0, &t1}, [&] { return world.tcp(1).peer_stats(0).parked_streams > 0; },
                  Deadline::after_ms(kTestTimeoutMs))
                  .is_ok());
  const tcp::TcpPeerStats parked = world.tcp(1).peer_stats(0);
  EXPECT_LE(parked.unexpected_bytes, tcp::kUnexpectedCapBytes);
  EXPECT_GE(parked.unexpected_bytes, tcp::kUnexpectedCapBytes - bytes);

  for (size_t i = 0; i < kMessages; ++i) {
    incoming[i].resize(bytes);
    ASSERT_TRUE(
        t1.irecv(0, 0, test_header(0, i, bytes), incoming[i].data(), bytes, &recvs[i]).is_ok());
  }
  run_ranks(2, [&](int rank) {
    EXPECT_TRUE(all_ok(wait_all(rank == 0 ? t0 : t1, rank == 0 ? sends : recvs,
                                Deadline::after_ms(kTestTimeoutMs))));
  });
  for (size_t i = 0; i < kMessages; ++i) ASSERT_TRUE(incoming[i] == outgoing[i]) << "message " << i;
  EXPECT_EQ(world.tcp(1).peer_stats(0).unexpected_bytes, 0u);
}

// A large send posted first is only announced: no payload moves until the receive is posted.
TEST(TcpProtocolTest, LargeSendWaitsForItsReceiveWithoutSendingData) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Transport& t0 = world.transport(0);
  Transport& t1 = world.transport(1);
  const size_t bytes = size_t{8} << 20;
  const std::vector<unsigned char> data = pattern(0, 1, 0, bytes);
  std::vector<unsigned char> got(bytes);
  Handle send = 0, recv = 0;
  ASSERT_TRUE(t0.isend(1, 5, test_header(0, 0, bytes), data.data(), bytes, &send).is_ok());
  ASSERT_TRUE(pump_until(
                  {&t0, &t1}, [&] { return world.tcp(1).peer_stats(0).announced_messages == 1; },
                  Deadline::after_ms(kTestTimeoutMs))
                  .is_ok());
  bool done = true;
  ASSERT_TRUE(t0.test(send, &done).is_ok());
  EXPECT_FALSE(done);
  EXPECT_LT(total_written(world.tcp(0).peer_stats(1)), 4096u) << "payload sent before the RTR";

  ASSERT_TRUE(t1.irecv(0, 5, test_header(0, 0, bytes), got.data(), bytes, &recv).is_ok());
  run_ranks(2, [&](int rank) {
    EXPECT_TRUE(all_ok(wait_all(rank == 0 ? t0 : t1, {rank == 0 ? send : recv},
                                Deadline::after_ms(kTestTimeoutMs))));
  });
  EXPECT_TRUE(got == data);
}

// A receive posted first sends its RTR at once; the later send then streams immediately.
TEST(TcpProtocolTest, ReceivePostedFirstLetsTheSendStreamAtOnce) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Transport& t0 = world.transport(0);
  Transport& t1 = world.transport(1);
  const size_t bytes = size_t{8} << 20;
  const std::vector<unsigned char> data = pattern(0, 1, 0, bytes);
  std::vector<unsigned char> got(bytes);
  Handle send = 0, recv = 0;
  ASSERT_TRUE(t1.irecv(0, 2, test_header(0, 0, bytes), got.data(), bytes, &recv).is_ok());
  ASSERT_TRUE(pump_until(
                  {&t0, &t1}, [&] { return world.tcp(0).peer_stats(1).early_rtrs == 1; },
                  Deadline::after_ms(kTestTimeoutMs))
                  .is_ok());
  const uint64_t before = total_written(world.tcp(0).peer_stats(1));
  ASSERT_TRUE(t0.isend(1, 2, test_header(0, 0, bytes), data.data(), bytes, &send).is_ok());
  EXPECT_GT(total_written(world.tcp(0).peer_stats(1)) - before, uint64_t{64} << 10)
      << "isend did not start streaming although the receiver was ready";
  run_ranks(2, [&](int rank) {
    EXPECT_TRUE(all_ok(wait_all(rank == 0 ? t0 : t1, {rank == 0 ? send : recv},
                                Deadline::after_ms(kTestTimeoutMs))));
  });
  EXPECT_TRUE(got == data);
}

struct MismatchCase {
  const char* name;
  size_t send_bytes;
  size_t recv_bytes;
  bool receive_first;
};

class HeaderMismatchTest : public ::testing::TestWithParam<MismatchCase> {};

// Rank 0 sends a message whose count differs from what rank 1 expects: rank 1's receive
// fails with MISMATCH naming both ranks and the field, no byte is stored, and rank 0 learns
// of it through rank 1's ABORT instead of hanging.
TEST_P(HeaderMismatchTest, FailsTheReceiveAndReachesTheSender) {
  const MismatchCase c = GetParam();
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Transport& t0 = world.transport(0);
  Transport& t1 = world.transport(1);
  const std::vector<unsigned char> data = pattern(0, 1, 0, c.send_bytes);
  std::vector<unsigned char> got(std::max(c.send_bytes, c.recv_bytes), 0xAB);
  WireHeader sent = test_header(0, 4, c.send_bytes);
  WireHeader expected = test_header(0, 4, c.recv_bytes);
  expected.count = sent.count - 1;  // differs even when the byte sizes agree
  Handle send = 0, recv = 0;
  auto post_receive = [&] {
    ASSERT_TRUE(t1.irecv(0, 0, expected, got.data(), got.size(), &recv).is_ok());
  };
  if (c.receive_first) post_receive();
  ASSERT_TRUE(t0.isend(1, 0, sent, data.data(), c.send_bytes, &send).is_ok());
  if (!c.receive_first) post_receive();

  Status received;
  bool received_done = false;
  ASSERT_TRUE(pump_until(
                  {&t0, &t1},
                  [&] {
                    if (!received_done) received = t1.test(recv, &received_done);
                    return received_done;
                  },
                  Deadline::after_ms(kTestTimeoutMs))
                  .code() != TIDEGATE_ERR_TIMEOUT);
  if (!received_done) received = t1.test(recv, &received_done);
  ASSERT_TRUE(received_done);
  EXPECT_EQ(received.code(), TIDEGATE_ERR_MISMATCH) << received.to_string();
  EXPECT_NE(received.message().find("rank 1"), std::string::npos) << received.message();
  EXPECT_NE(received.message().find("rank 0"), std::string::npos) << received.message();
  EXPECT_NE(received.message().find("'count'"), std::string::npos) << received.message();
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](unsigned char b) { return b == 0xAB; }))
      << "payload bytes were stored although the header did not match";

  Status sender = progress_until(
      t0, [] { return false; }, Deadline::after_ms(kTestTimeoutMs));
  EXPECT_EQ(sender.code(), TIDEGATE_ERR_MISMATCH) << sender.to_string();
  EXPECT_NE(sender.message().find("rank 1 aborted"), std::string::npos) << sender.message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HeaderMismatchTest,
    ::testing::Values(MismatchCase{"EagerSendFirst", 100, 100, false},
                      MismatchCase{"EagerReceiveFirst", 100, 100, true},
                      MismatchCase{"RendezvousSendFirst", 1 << 20, 1 << 20, false},
                      MismatchCase{"RendezvousReceiveFirst", 1 << 20, 1 << 20, true},
                      MismatchCase{"LargeSentSmallExpected", 1 << 20, 1000, false},
                      MismatchCase{"SmallSentLargeExpected", 1000, 1 << 20, true}),
    [](const ::testing::TestParamInfo<MismatchCase>& param_info) {
      return std::string(param_info.param.name);
    });

TEST(TcpProtocolTest, RejectsInvalidArguments) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  Transport& t = world.transport(0);
  std::vector<unsigned char> buffer(16);
  Handle h = 0;
  EXPECT_EQ(t.isend(0, 0, test_header(0, 0, 16), buffer.data(), 16, &h).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.isend(2, 0, test_header(0, 0, 16), buffer.data(), 16, &h).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.isend(1, 0, test_header(0, 0, 16), nullptr, 16, &h).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.irecv(1, 0, test_header(1, 0, 32), buffer.data(), 16, &h).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(t.name(), "tcp");
  EXPECT_TRUE(t.capabilities().host_memory);
  EXPECT_FALSE(t.capabilities().cuda_memory);
}

}  // namespace
}  // namespace tidegate::tcp_testing
