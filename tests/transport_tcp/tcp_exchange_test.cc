// Data paths of the TCP transport: all-pairs exchange, zero-byte, striped large messages and
// FIFO matching per (peer, channel) across the eager and rendezvous protocols.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

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

// Every rank sends a small, an eager-limit, a just-rendezvous and a striped message to every
// other rank and receives the same from each; all bytes are verified.
class AllPairsTest : public ::testing::TestWithParam<int> {};

TEST_P(AllPairsTest, EveryRankExchangesVerifiedDataWithEveryOther) {
  const int size = GetParam();
  TcpWorld world(size);
  ASSERT_TRUE(world.all_ok()) << describe(world.statuses());
  const std::vector<size_t> sizes = {1, 4099, tcp::kEagerMaxBytes, tcp::kEagerMaxBytes + 1,
                                     (size_t{3} << 19) + 5};
  run_ranks(size, [&](int rank) {
    Transport& t = world.transport(rank);
    std::vector<std::vector<unsigned char>> outgoing, incoming;
    std::vector<Handle> handles;
    std::vector<std::pair<int, uint64_t>> receives;  // (peer, seq) per incoming buffer
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      for (uint64_t seq = 0; seq < sizes.size(); ++seq) {
        outgoing.push_back(pattern(rank, peer, seq, sizes[seq]));
        incoming.emplace_back(sizes[seq]);
        receives.emplace_back(peer, seq);
        Handle send = 0, recv = 0;
        ASSERT_TRUE(t.isend(peer, 0, test_header(rank, seq, sizes[seq]), outgoing.back().data(),
                            sizes[seq], &send)
                        .is_ok());
        ASSERT_TRUE(t.irecv(peer, 0, test_header(peer, seq, sizes[seq]), incoming.back().data(),
                            sizes[seq], &recv)
                        .is_ok());
        handles.push_back(send);
        handles.push_back(recv);
      }
    }
    std::vector<Status> results = wait_all(t, handles, Deadline::after_ms(kTestTimeoutMs));
    EXPECT_TRUE(
        std::all_of(results.begin(), results.end(), [](const Status& s) { return s.is_ok(); }))
        << "rank " << rank << ":\n"
        << describe(results);
    for (size_t i = 0; i < incoming.size(); ++i) {
      const auto [peer, seq] = receives[i];
      EXPECT_TRUE(incoming[i] == pattern(peer, rank, seq, sizes[seq]))
          << "rank " << rank << " got wrong bytes from rank " << peer << " message " << seq;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllPairsTest, ::testing::Values(2, 3, 4, 5));

TEST(TcpExchangeTest, ZeroByteMessagesKeepTheirPlaceInTheChannelOrder) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok()) << describe(world.statuses());
  Transport& t0 = world.transport(0);
  Transport& t1 = world.transport(1);
  const std::vector<unsigned char> ten = pattern(0, 1, 1, 10);
  std::vector<unsigned char> received(10, 0);
  Handle s0, s1, s2, r0, r1, r2;
  ASSERT_TRUE(t0.isend(1, 3, test_header(0, 0, 0), nullptr, 0, &s0).is_ok());
  ASSERT_TRUE(t0.isend(1, 3, test_header(0, 1, 10), ten.data(), 10, &s1).is_ok());
  ASSERT_TRUE(t0.isend(1, 3, test_header(0, 2, 0), nullptr, 0, &s2).is_ok());
  ASSERT_TRUE(t1.irecv(0, 3, test_header(0, 0, 0), nullptr, 0, &r0).is_ok());
  ASSERT_TRUE(t1.irecv(0, 3, test_header(0, 1, 10), received.data(), 10, &r1).is_ok());
  ASSERT_TRUE(t1.irecv(0, 3, test_header(0, 2, 0), nullptr, 0, &r2).is_ok());
  std::vector<Status> sent, got;
  run_ranks(2, [&](int rank) {
    if (rank == 0) sent = wait_all(t0, {s0, s1, s2}, Deadline::after_ms(kTestTimeoutMs));
    if (rank == 1) got = wait_all(t1, {r0, r1, r2}, Deadline::after_ms(kTestTimeoutMs));
  });
  EXPECT_EQ(describe(sent), "");
  EXPECT_EQ(describe(got), "");
  EXPECT_EQ(received, ten);
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

// Rank 1 receives channel 3's messages first, then 2, 1, 0, although rank 0 sent them
// interleaved: channels are independent, so earlier channels' messages wait unexpected.
TEST(TcpExchangeTest, InterleavedChannelsAreMatchedIndependently) {
  TcpWorld world(2);
  ASSERT_TRUE(world.all_ok()) << describe(world.statuses());
  constexpr int kChannels = 4;
  constexpr uint64_t kPerChannel = 100;
  auto bytes_of = [](int channel, uint64_t seq) {
    return static_cast<size_t>(channel * 1000 + seq * 11);
  };
  std::vector<std::vector<unsigned char>> outgoing;
  outgoing.reserve(kChannels * kPerChannel);
  std::vector<Handle> sends;
  for (uint64_t seq = 0; seq < kPerChannel; ++seq) {
    for (int channel = 0; channel < kChannels; ++channel) {
      outgoing.push_back(pattern(0, 1, seq * kChannels + channel, bytes_of(channel, seq)));
      Handle h = 0;
      ASSERT_TRUE(world.transport(0)
                      .isend(1, static_cast<uint32_t>(channel),
                             test_header(0, seq, outgoing.back().size()), outgoing.back().data(),
                             outgoing.back().size(), &h)
                      .is_ok());
      sends.push_back(h);
    }
  }
  run_ranks(2, [&](int rank) {
    if (rank == 0) {
      EXPECT_EQ(describe(wait_all(world.transport(0), sends, Deadline::after_ms(kTestTimeoutMs))),
                "");
      return;
    }
    for (int channel = kChannels - 1; channel >= 0; --channel) {
      std::vector<std::vector<unsigned char>> incoming(kPerChannel);
      std::vector<Handle> recvs(kPerChannel);
      for (uint64_t seq = 0; seq < kPerChannel; ++seq) {
        incoming[seq].resize(bytes_of(channel, seq));
        ASSERT_TRUE(world.transport(1)
                        .irecv(0, static_cast<uint32_t>(channel),
                               test_header(0, seq, incoming[seq].size()), incoming[seq].data(),
                               incoming[seq].size(), &recvs[seq])
                        .is_ok());
      }
      EXPECT_EQ(describe(wait_all(world.transport(1), recvs, Deadline::after_ms(kTestTimeoutMs))),
                "");
      for (uint64_t seq = 0; seq < kPerChannel; ++seq) {
        EXPECT_TRUE(incoming[seq] == pattern(0, 1, seq * kChannels + channel, incoming[seq].size()))
            << "channel " << channel << " message " << seq;
      }
    }
  });
}

}  // namespace
}  // namespace tidegate::tcp_testing
