// Data paths of the TCP transport: striped large messages and FIFO matching on one channel
// across the eager and rendezvous protocols. The transport contract itself (round trips,
// per-channel order, channel independence, empty messages) is tests/transport_conformance.
#include <gtest/gtest.h>

#include "tests/transport_tcp/tcp_test_util.h"

namespace tidegate::tcp_testing {
namespace {

using Handle = Transport::Handle;

std::string describe(const std::vector<Status>& statuses) {
  std::string text;
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].is_ok())
      text += "[" + std::to_string(i) + "] " + statuses[i].to_string() + "\n";
  }
  return text;
}

// 64 MiB from rank 0 to rank 1 while 8 MiB flows back (full duplex), with 1 and 4 streams.
class LargeMessageTest : public ::testing::TestWithParam<int> {};

TEST_P(LargeMessageTest, ArrivesIntactAndIsStripedOverEveryStream) {
  const int streams = GetParam();
  WorldOptions options;
  options.streams = streams;
  TcpWorld world(2, options);
  ASSERT_TRUE(world.all_ok()) << describe(world.statuses());
  const size_t big = size_t{64} << 20;
  const size_t back = size_t{8} << 20;
  const std::vector<unsigned char> forward_data = pattern(0, 1, 0, big);
  const std::vector<unsigned char> backward_data = pattern(1, 0, 0, back);
  std::vector<unsigned char> forward_got(big), backward_got(back);
  run_ranks(2, [&](int rank) {
    Transport& t = world.transport(rank);
    Handle send = 0, recv = 0;
    if (rank == 0) {
      ASSERT_TRUE(t.isend(1, 0, test_header(0, 0, big), forward_data.data(), big, &send).is_ok());
      ASSERT_TRUE(t.irecv(1, 0, test_header(1, 0, back), backward_got.data(), back, &recv).is_ok());
    } else {
      ASSERT_TRUE(
          t.isend(0, 0, test_header(1, 0, back), backward_data.data(), back, &send).is_ok());
      ASSERT_TRUE(t.irecv(0, 0, test_header(0, 0, big), forward_got.data(), big, &recv).is_ok());
    }
    EXPECT_EQ(describe(wait_all(t, {send, recv}, Deadline::after_ms(kTestTimeoutMs))), "");
  });
  EXPECT_TRUE(forward_got == forward_data);
  EXPECT_TRUE(backward_got == backward_data);
  const tcp::TcpPeerStats stats = world.tcp(0).peer_stats(1);
  ASSERT_EQ(stats.bytes_written.size(), static_cast<size_t>(streams));
  for (uint64_t written : stats.bytes_written) {
    EXPECT_GE(written, big / streams) << "a stream carried less than its stripe";
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, LargeMessageTest, ::testing::Values(1, 4));

// Sizes cycle through tiny, eager and rendezvous messages on one channel.
size_t fifo_size(uint64_t seq) {
  if (seq % 97 == 13) return (size_t{1} << 20) + seq;       // rendezvous, striped
  if (seq % 31 == 7) return tcp::kEagerMaxBytes + 1 + seq;  // rendezvous
  return static_cast<size_t>((seq * 37) % 3001);            // eager, including 0
}

TEST(TcpExchangeTest, ManyMessagesOnOneChannelMatchInSendOrder) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok()) << describe(world.statuses());
  constexpr uint64_t kMessages = 1500;
  std::vector<std::vector<unsigned char>> sent(kMessages), got(kMessages);
  run_ranks(2, [&](int rank) {
    Transport& t = world.transport(rank);
    std::vector<Handle> handles(kMessages);
    for (uint64_t seq = 0; seq < kMessages; ++seq) {
      const size_t bytes = fifo_size(seq);
      if (rank == 0) {
        sent[seq] = pattern(0, 1, seq, bytes);
        ASSERT_TRUE(
            t.isend(1, 9, test_header(0, seq, bytes), sent[seq].data(), bytes, &handles[seq])
                .is_ok());
      } else {
        got[seq].resize(bytes);
        ASSERT_TRUE(t.irecv(0, 9, test_header(0, seq, bytes), got[seq].data(), bytes, &handles[seq])
                        .is_ok());
      }
    }
    EXPECT_EQ(describe(wait_all(t, handles, Deadline::after_ms(kTestTimeoutMs))), "");
  });
  for (uint64_t seq = 0; seq < kMessages; ++seq) {
    ASSERT_TRUE(got[seq] == sent[seq]) << "message " << seq << " of " << fifo_size(seq) << " bytes";
  }
}

}  // namespace
}  // namespace tidegate::tcp_testing
