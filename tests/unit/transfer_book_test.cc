// The transfer bookkeeping the mpi and ucx transports share (transports/common/transfer_book.h):
// payload receives are posted only after their header checked out, and in irecv order per (peer,
// channel); a header mismatch finishes the receive with MISMATCH; a failure finishes every pending
// transfer.
#include "transports/common/transfer_book.h"

#include <gtest/gtest.h>

#include <vector>

namespace tidegate {
namespace {

using Book = TransferBook<Transfer>;

WireHeader header_from(int sender, uint64_t op_seq, uint64_t bytes) {
  WireHeader h;
  h.comm_id = 7;
  h.op_seq = op_seq;
  h.count = static_cast<int64_t>(bytes);
  h.payload_bytes = bytes;
  h.sender_rank = static_cast<uint32_t>(sender);
  return h;
}

// What the transport would receive from the peer: the header, encoded into the op's buffer.
void arrive(Transfer& op, const WireHeader& sent) { encode_wire_header(sent, op.wire.data()); }

struct PostLog {
  std::vector<Transport::Handle> posted;
  Status operator()(Transport::Handle h, Transfer& op) {
    posted.push_back(h);
    ++op.parts_left;  // one payload message, still in flight
    return Status::ok();
  }
};

TEST(TransferBook, PayloadsArePostedInIrecvOrderOnceTheirHeadersCheckedOut) {
  Book book;
  char a[16] = {};
  char b[16] = {};
  Transfer* first = nullptr;
  Transfer* second = nullptr;
  const auto h1 = book.add_recv(1, 0, header_from(1, 0, 16), a, &first);
  const auto h2 = book.add_recv(1, 0, header_from(1, 1, 16), b, &second);
  PostLog log;
  // The second header arrives first: its payload must wait for the first receive's.
  arrive(*second, header_from(1, 1, 16));
  ASSERT_TRUE(book.accept_header(*second, 0, log).is_ok());
  EXPECT_TRUE(log.posted.empty());
  arrive(*first, header_from(1, 0, 16));
  ASSERT_TRUE(book.accept_header(*first, 0, log).is_ok());
  EXPECT_EQ(log.posted, (std::vector<Transport::Handle>{h1, h2}));
  EXPECT_TRUE(first->payload_posted);
  EXPECT_TRUE(second->payload_posted);

  bool done = true;
  ASSERT_TRUE(book.test(h1, &done, nullptr).is_ok());
  EXPECT_FALSE(done);  // its payload is still in flight
  --first->parts_left;
  Book::settle(*first);
  ASSERT_TRUE(book.test(h1, &done, nullptr).is_ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(book.test(h1, &done, nullptr).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);  // forgotten once reported
  EXPECT_EQ(book.pending(), 1u);
}

TEST(TransferBook, ChannelsAndPeersQueueSeparately) {
  Book book;
  char a[8] = {};
  char b[8] = {};
  Transfer* on_channel_0 = nullptr;
  Transfer* on_channel_1 = nullptr;
  book.add_recv(1, 0, header_from(1, 0, 8), a, &on_channel_0);
  const auto h = book.add_recv(1, 1, header_from(1, 0, 8), b, &on_channel_1);
  PostLog log;
  arrive(*on_channel_1, header_from(1, 0, 8));
  ASSERT_TRUE(book.accept_header(*on_channel_1, 0, log).is_ok());
  EXPECT_EQ(log.posted, (std::vector<Transport::Handle>{h}));  // not held by channel 0
}

TEST(TransferBook, HeaderMismatchFinishesTheReceiveWithMismatch) {
  Book book;
  char a[16] = {};
  Transfer* op = nullptr;
  const auto h = book.add_recv(1, 0, header_from(1, 0, 16), a, &op);
  WireHeader sent = header_from(1, 0, 16);
  sent.count = 15;
  arrive(*op, sent);
  PostLog log;
  const Status st = book.accept_header(*op, 0, log);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH) << st.to_string();
  EXPECT_NE(st.message().find("'count'"), std::string::npos) << st.message();
  EXPECT_TRUE(log.posted.empty()) << "payload posted after a mismatching header";
  bool done = false;
  EXPECT_EQ(book.test(h, &done, nullptr).code(), TIDEGATE_ERR_MISMATCH);
  EXPECT_TRUE(done);
}

TEST(TransferBook, BoundedReceivePostsAndReportsTheSendersLength) {
  Book book;
  char a[64] = {};
  Transfer* op = nullptr;
  WireHeader bound = header_from(1, 0, 64);
  bound.flags = kWireFlagBoundedPayload;
  const auto h = book.add_recv(1, 0, bound, a, &op);
  WireHeader sent = header_from(1, 0, 64);  // the same op (count), a shorter payload
  sent.flags = kWireFlagBoundedPayload;
  sent.payload_bytes = 23;
  arrive(*op, sent);
  size_t posted_bytes = 0;
  ASSERT_TRUE(book.accept_header(*op, 0,
                                 [&](Transport::Handle, Transfer& ready) {
                                   posted_bytes = ready.length;
                                   return Status::ok();
                                 })
                  .is_ok());
  EXPECT_EQ(posted_bytes, 23u);  // the payload receive asks for the sender's length
  Book::settle(*op);
  bool done = false;
  size_t reported = 0;
  ASSERT_TRUE(book.test(h, &done, &reported).is_ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(reported, 23u);

  // One byte over the bound: refused before any payload is posted, naming both lengths.
  Transfer* over = nullptr;
  const auto h2 = book.add_recv(1, 0, bound, a, &over);
  sent.op_seq = 0;
  sent.payload_bytes = 65;
  arrive(*over, sent);
  bool posted = false;
  const Status st = book.accept_header(*over, 0, [&](Transport::Handle, Transfer&) {
    posted = true;
    return Status::ok();
  });
  EXPECT_EQ(st.code(), TIDEGATE_ERR_PROTOCOL) << st.to_string();
  EXPECT_NE(st.message().find("65 bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bound of 64"), std::string::npos) << st.message();
  EXPECT_FALSE(posted);
  EXPECT_EQ(book.test(h2, &done, nullptr).code(), TIDEGATE_ERR_PROTOCOL);
}

TEST(TransferBook, FailPendingFinishesEveryPendingTransfer) {
  Book book;
  char a[4] = {};
  Transfer* recv = nullptr;
  Transfer* send = nullptr;
  const auto hr = book.add_recv(1, 0, header_from(1, 0, 4), a, &recv);
  const auto hs = book.add_send(2, 0, header_from(0, 0, 4), &send);
  EXPECT_TRUE(send->is_send);
  EXPECT_EQ(decode_wire_header(send->wire.data()).payload_bytes, 4u);  // encoded, ready to post
  EXPECT_EQ(book.pending(), 2u);
  book.fail_pending(peer_failed("rank 1 went away"));
  EXPECT_EQ(book.pending(), 0u);
  EXPECT_EQ(book.find_pending(hr), nullptr);
  bool done = false;
  EXPECT_EQ(book.test(hs, &done, nullptr).code(), TIDEGATE_ERR_PEER_FAILED);
  EXPECT_TRUE(done);
}

TEST(TransferArguments, NameTheBadArgument) {
  char buffer[8] = {};
  EXPECT_TRUE(check_send_arguments(header_from(0, 0, 8), buffer, 8).is_ok());
  Status st = check_send_arguments(header_from(0, 0, 8), buffer, 7);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("payload_bytes (8)"), std::string::npos) << st.message();
  EXPECT_EQ(check_send_arguments(header_from(0, 0, 8), nullptr, 8).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(check_send_arguments(header_from(0, 0, 0), nullptr, 0).is_ok());
  EXPECT_TRUE(check_recv_arguments(header_from(0, 0, 4), buffer, 8).is_ok());
  st = check_recv_arguments(header_from(0, 0, 9), buffer, 8);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("exceeds the capacity 8"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tidegate
