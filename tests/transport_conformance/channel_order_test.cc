// Channels: the k-th message a rank sends to a peer on a channel fills the peer's k-th receive
// from it on that channel (FIFO per channel), and channels never block one another.
#include <algorithm>
#include <memory>

#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

// The channels a body may use: `want`, or fewer when the transport offers fewer.
uint32_t usable_channels(const Transport& transport, uint32_t want) {
  const uint32_t offered = transport.capabilities().channels;
  return offered == 0 ? want : std::min(want, offered);
}

using Buffers = std::vector<std::unique_ptr<MessageBuffer>>;

MessageBuffer& add_buffer(Buffers& buffers, const Transport& transport, size_t bytes,
                          unsigned char fill) {
  buffers.push_back(std::make_unique<MessageBuffer>(transport, bytes, fill));
  return *buffers.back();
}

class Channels : public WorldTest {};

constexpr uint32_t kChannels = 4;
constexpr uint32_t kMessagesPerChannel = 12;

// Empty, small and rendezvous-sized messages (past TCP's eager limit and UCX's rendezvous
// threshold) alternate, so a later small message could overtake an earlier large one.
size_t fifo_bytes(uint32_t channel, uint32_t index) {
  switch ((channel + index) % 4) {
    case 0:
      return 0;
    case 1:
      return 8 + index;
    case 2:
      return (size_t{300} << 10) + index;
    default:
      return 5000 + 13 * channel + index;
  }
}
uint64_t fifo_seq(uint32_t channel, uint32_t index) { return channel * 1000 + index; }

// Every rank sends 12 messages on each of 4 channels to the next rank, interleaving the
// channels; the next rank receives them channel by channel, the last channel first, so the
// earlier channels' messages wait unexpected meanwhile. Each message carries its index in its
// header (chunk) and its payload: one delivered out of order fails the receiver's header check.
TEST_P(Channels, EachChannelDeliversInSendOrder) {
  run([&](Rank& r) {
    Transport& t = r.transport();
    const uint32_t channels = usable_channels(t, kChannels);
    Buffers outgoing;
    std::vector<Handle> sends;
    for (uint32_t index = 0; index < kMessagesPerChannel; ++index) {
      for (uint32_t channel = 0; channel < channels; ++channel) {
        const size_t bytes = fifo_bytes(channel, index);
        MessageBuffer& out = add_buffer(outgoing, t, bytes, 0);
        out.write(pattern(r.rank(), r.next(), fifo_seq(channel, index), bytes));
        sends.push_back(post_send(r, r.next(), channel,
                                  message_header(r, r.rank(), channel, index, bytes), out));
      }
    }
    for (uint32_t channel = channels; channel-- > 0;) {
      Buffers incoming;
      std::vector<Handle> recvs;
      for (uint32_t index = 0; index < kMessagesPerChannel; ++index) {
        const size_t bytes = fifo_bytes(channel, index);
        MessageBuffer& in = add_buffer(incoming, t, bytes, 0xcd);
        recvs.push_back(post_recv(r, r.prev(), channel,
                                  message_header(r, r.prev(), channel, index, bytes), in));
      }
      const std::vector<Finished> got = wait_all(t, recvs);
      ASSERT_EQ(failures(got), "") << "rank " << r.rank() << " channel " << channel;
      for (uint32_t index = 0; index < kMessagesPerChannel; ++index) {
        const size_t bytes = fifo_bytes(channel, index);
        EXPECT_EQ(got[index].bytes, bytes);
        EXPECT_TRUE(incoming[index]->read() ==
                    pattern(r.prev(), r.rank(), fifo_seq(channel, index), bytes))
            << "rank " << r.rank() << " channel " << channel << " message " << index;
      }
    }
    ASSERT_EQ(failures(wait_all(t, sends)), "") << "rank " << r.rank() << ": sends";
    expect_clean_close(r);
  });
}

// No head-of-line blocking: with receives pending on channel 0 whose messages have not even
// been sent, a message on channel 1 is delivered. Each rank's sender waits for the receiver's
// acknowledgement (on channel 2) before it sends channel 0's messages, so a transport that
// served channel 1 only after channel 0 would time out here.
TEST_P(Channels, ReceiveOnOneChannelCompletesWhileAnotherWaits) {
  run([&](Rank& r) {
    Transport& t = r.transport();
    const uint32_t offered = t.capabilities().channels;
    if (offered != 0 && offered < 3) {
      GTEST_SKIP() << t.name() << " offers " << offered
                   << " channel(s) (capabilities().channels); independence needs three";
    }
    const std::vector<size_t> sizes = {100, 0, (size_t{300} << 10) + 1, 7};
    Buffers incoming, outgoing;
    std::vector<Handle> waiting;
    for (uint32_t index = 0; index < sizes.size(); ++index) {
      MessageBuffer& in = add_buffer(incoming, t, sizes[index], 0xcd);
      waiting.push_back(
          post_recv(r, r.prev(), 0, message_header(r, r.prev(), 0, index, sizes[index]), in));
    }
    MessageBuffer& side_in = add_buffer(outgoing, t, 64, 0xcd);
    const Handle side_recv =
        post_recv(r, r.prev(), 1, message_header(r, r.prev(), 1, 0, 64), side_in);
    MessageBuffer& empty = add_buffer(outgoing, t, 0, 0);  // the go-ahead carries no payload
    const Handle ack_recv = post_recv(r, r.next(), 2, message_header(r, r.next(), 2, 0, 0), empty);
    MessageBuffer& side_out = add_buffer(outgoing, t, 64, 0);
    side_out.write(pattern(r.rank(), r.next(), 1, 64));
    const Handle side_send =
        post_send(r, r.next(), 1, message_header(r, r.rank(), 1, 0, 64), side_out);

    const Finished side = wait_one(t, side_recv);
    ASSERT_TRUE(side.done && side.status.is_ok())
        << "rank " << r.rank() << ": the receive on channel 1 did not complete while "
        << waiting.size()
        << " receives waited on channel 0 (head-of-line blocking?): " << side.status.to_string();
    EXPECT_TRUE(side_in.read() == pattern(r.prev(), r.rank(), 1, 64));
    for (Handle h : waiting) {
      bool done = true;
      const Status st = t.test(h, &done);
      EXPECT_TRUE(st.is_ok() && !done) << "rank " << r.rank() << ": a channel-0 receive whose "
                                       << "message was never sent finished: " << st.to_string();
    }
    // Tell the previous rank it may send channel 0's messages, and wait for our own go-ahead.
    const Handle ack_send = post_send(r, r.prev(), 2, message_header(r, r.rank(), 2, 0, 0), empty);
    ASSERT_EQ(failures({wait_one(t, ack_recv)}), "") << "rank " << r.rank() << ": go-ahead";
    std::vector<Handle> rest = {side_send, ack_send};
    for (uint32_t index = 0; index < sizes.size(); ++index) {
      MessageBuffer& out = add_buffer(outgoing, t, sizes[index], 0);
      out.write(pattern(r.rank(), r.next(), 100 + index, sizes[index]));
      rest.push_back(
          post_send(r, r.next(), 0, message_header(r, r.rank(), 0, index, sizes[index]), out));
    }
    rest.insert(rest.end(), waiting.begin(), waiting.end());
    ASSERT_EQ(failures(wait_all(t, rest)), "") << "rank " << r.rank();
    for (uint32_t index = 0; index < sizes.size(); ++index) {
      EXPECT_TRUE(incoming[index]->read() == pattern(r.prev(), r.rank(), 100 + index, sizes[index]))
          << "rank " << r.rank() << " channel 0 message " << index;
    }
    expect_clean_close(r);
  });
}

TIDEGATE_CONFORMANCE_INSTANTIATE(Channels, {});

}  // namespace
}  // namespace tidegate::conformance
