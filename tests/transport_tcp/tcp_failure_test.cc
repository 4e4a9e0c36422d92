// How the TCP transport ends: a peer that disappears, and a graceful close. abort() (local,
// from another thread, and relayed to every peer) is tests/transport_conformance's abort case.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/transport_tcp/tcp_test_util.h"

namespace tidegate::tcp_testing {
namespace {

using Handle = Transport::Handle;

uint64_t total_written(const tcp::TcpPeerStats& stats) {
  return std::accumulate(stats.bytes_written.begin(), stats.bytes_written.end(), uint64_t{0});
}

// Rank 0 is destroyed in the middle of streaming a large message: rank 1's receive fails
// with PEER_FAILED naming rank 0, well before the deadline.
TEST(TcpFailureTest, PeerDestroyedMidTransferFailsThePendingReceive) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  const size_t bytes = size_t{256} << 20;
  std::vector<unsigned char> data(bytes, 1), got(bytes);
  Handle send = 0, recv = 0;
  ASSERT_TRUE(
      world.transport(1).irecv(0, 0, test_header(0, 0, bytes), got.data(), bytes, &recv).is_ok());
  ASSERT_TRUE(
      world.transport(0).isend(1, 0, test_header(0, 0, bytes), data.data(), bytes, &send).is_ok());
  // Rank 1 does not read yet, so rank 0 stalls with part of the message written.
  ASSERT_TRUE(progress_until(
                  world.transport(0),
                  [&] { return total_written(world.tcp(0).peer_stats(1)) > (1u << 20); },
                  Deadline::after_ms(kTestTimeoutMs))
                  .is_ok());
  world.owned(0).reset();
  const auto start = Clock::now();
  std::vector<Status> results =
      wait_all(world.transport(1), {recv}, Deadline::after_ms(kTestTimeoutMs));
  EXPECT_EQ(results[0].code(), TIDEGATE_ERR_PEER_FAILED) << results[0].to_string();
  EXPECT_NE(results[0].message().find("connection to rank 0 lost"), std::string::npos)
      << results[0].message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// A peer that disappears while nothing is pending is noticed, and later transfers fail at once.
TEST(TcpFailureTest, PeerLostWhileIdleFailsLaterTransfersAtOnce) {
  TcpWorld world(3);
  ASSERT_TRUE(world.all_ok());
  world.owned(0).reset();
  Status lost = progress_until(
      world.transport(1), [] { return false; }, Deadline::after_ms(kTestTimeoutMs));
  EXPECT_EQ(lost.code(), TIDEGATE_ERR_PEER_FAILED) << lost.to_string();
  EXPECT_NE(lost.message().find("rank 0"), std::string::npos) << lost.message();
  Handle h = 0;
  EXPECT_EQ(world.transport(1).isend(0, 0, test_header(1, 0, 0), nullptr, 0, &h).code(),
            TIDEGATE_ERR_PEER_FAILED);
  EXPECT_EQ(world.transport(1).irecv(2, 0, test_header(2, 0, 0), nullptr, 0, &h).code(),
            TIDEGATE_ERR_PEER_FAILED);
}

// close() says goodbye: the peer records it without failing, refuses new transfers to the
// closed rank with a clear error, and closes cleanly itself.
TEST(TcpFailureTest, GracefulCloseIsNotAFailure) {
  TcpWorld world(3);
  ASSERT_TRUE(world.all_ok());
  EXPECT_TRUE(world.transport(0).close(Deadline::after_ms(kTestTimeoutMs)).is_ok());
  Status waited = progress_until(
      world.transport(1), [&] { return world.tcp(1).peer_stats(0).said_goodbye; },
      Deadline::after_ms(kTestTimeoutMs));
  ASSERT_TRUE(waited.is_ok()) << waited.to_string();
  // Its end of stream follows the goodbye: still no failure, and ranks 1 and 2 still talk.
  std::vector<unsigned char> out = pattern(1, 2, 0, 1000), in(1000);
  Handle send = 0, recv = 0;
  ASSERT_TRUE(
      world.transport(1).isend(2, 0, test_header(1, 0, 1000), out.data(), 1000, &send).is_ok());
  ASSERT_TRUE(
      world.transport(2).irecv(1, 0, test_header(1, 0, 1000), in.data(), 1000, &recv).is_ok());
  run_ranks(3, [&](int rank) {
    if (rank == 0) return;
    std::vector<Status> r = wait_all(world.transport(rank), {rank == 1 ? send : recv},
                                     Deadline::after_ms(kTestTimeoutMs));
    EXPECT_TRUE(r[0].is_ok()) << r[0].to_string();
  });
  EXPECT_EQ(in, out);
  Handle h = 0;
  Status refused = world.transport(1).isend(0, 0, test_header(1, 1, 0), nullptr, 0, &h);
  EXPECT_EQ(refused.code(), TIDEGATE_ERR_PEER_FAILED);
  EXPECT_NE(refused.message().find("closed its transport"), std::string::npos) << refused.message();
  run_ranks(3, [&](int rank) {
    if (rank > 0) {
      EXPECT_TRUE(world.transport(rank).close(Deadline::after_ms(kTestTimeoutMs)).is_ok());
    }
  });
}

// A rank may close right after its last (eager) send completed locally: the message is
// still delivered to a receive posted after the goodbye; a receive for a message that was
// never sent fails at once instead of waiting for the deadline.
TEST(TcpFailureTest, MessagesSentBeforeTheGoodbyeAreStillReceived) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  const std::vector<unsigned char> last = pattern(0, 1, 0, 5000);
  Handle send = 0;
  ASSERT_TRUE(
      world.transport(0).isend(1, 0, test_header(0, 0, 5000), last.data(), 5000, &send).is_ok());
  ASSERT_TRUE(wait_all(world.transport(0), {send}, Deadline::after_ms(kTestTimeoutMs))[0].is_ok());
  ASSERT_TRUE(world.transport(0).close(Deadline::after_ms(kTestTimeoutMs)).is_ok());

  Transport& t1 = world.transport(1);
  ASSERT_TRUE(progress_until(
                  t1, [&] { return world.tcp(1).peer_stats(0).said_goodbye; },
                  Deadline::after_ms(kTestTimeoutMs))
                  .is_ok());
  std::vector<unsigned char> got(5000), never(size_t{1} << 20);
  Handle recv = 0, missing = 0;
  ASSERT_TRUE(t1.irecv(0, 0, test_header(0, 0, 5000), got.data(), got.size(), &recv).is_ok());
  ASSERT_TRUE(t1.irecv(0, 0, test_header(0, 1, never.size()), never.data(), never.size(), &missing)
                  .is_ok());
  bool done = false;
  EXPECT_TRUE(t1.test(recv, &done).is_ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(got, last);
  Status refused = t1.test(missing, &done);
  EXPECT_TRUE(done);
  EXPECT_EQ(refused.code(), TIDEGATE_ERR_PEER_FAILED) << refused.to_string();
  bool activity = false;
  EXPECT_TRUE(t1.progress(Milliseconds(10), &activity).is_ok()) << "a goodbye is not a failure";
}

// Every rank closes at the same time right after heavy traffic: no rank sees a failure.
TEST(TcpFailureTest, ConcurrentCloseAfterTrafficIsClean) {
  TcpWorld world(4);
  ASSERT_TRUE(world.all_ok());
  const size_t bytes = size_t{3} << 20;
  run_ranks(4, [&](int rank) {
    Transport& t = world.transport(rank);
    const int next = (rank + 1) % 4, prev = (rank + 3) % 4;
    std::vector<unsigned char> out = pattern(rank, next, 0, bytes), in(bytes);
    Handle send = 0, recv = 0;
    ASSERT_TRUE(t.isend(next, 0, test_header(rank, 0, bytes), out.data(), bytes, &send).is_ok());
    ASSERT_TRUE(t.irecv(prev, 0, test_header(prev, 0, bytes), in.data(), bytes, &recv).is_ok());
    for (const Status& st : wait_all(t, {send, recv}, Deadline::after_ms(kTestTimeoutMs))) {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    }
    EXPECT_TRUE(in == pattern(prev, rank, 0, bytes));
    Status closed = t.close(Deadline::after_ms(kTestTimeoutMs));
    EXPECT_TRUE(closed.is_ok()) << closed.to_string();
  });
}

TEST(TcpFailureTest, CloseWithPendingTransfersIsRefused) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok());
  std::vector<unsigned char> buffer(10);
  Handle recv = 0;
  ASSERT_TRUE(
      world.transport(0).irecv(1, 0, test_header(1, 0, 10), buffer.data(), 10, &recv).is_ok());
  EXPECT_EQ(world.transport(0).close(Deadline::after_ms(1000)).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tidegate::tcp_testing
