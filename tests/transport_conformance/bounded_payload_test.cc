// Bounded (variable-size) payloads, kWireFlagBoundedPayload: a receive expects at most a bound
// and the sender's header announces the message's actual length. The receiver stores exactly
// that many bytes (the rest of its buffer stays untouched) and test() reports the length; a
// message over the bound is refused before a byte is stored, on the receiver with a PROTOCOL
// error naming 'payload bytes' and the bound, on the sender through the relayed failure.
#include <random>

#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

class BoundedPayload : public WorldTest {};

constexpr uint32_t kMessages = 8;
constexpr size_t kGuardBytes = 4096;  // receive capacity beyond the bound, which must stay
constexpr unsigned char kUntouched = 0xee;
constexpr int64_t kOpCount = 777;  // the op's own count: equal on both sides for every length

// Lengths of the messages `sender` sends: the bound, empty, then seeded random ones up to it.
std::vector<size_t> lengths_from(int sender, size_t bound) {
  std::mt19937_64 random(0x7e57b0 + static_cast<uint64_t>(sender));
  std::uniform_int_distribution<size_t> length(0, bound);
  std::vector<size_t> lengths = {bound, 0};
  while (lengths.size() < kMessages) lengths.push_back(length(random));
  return lengths;
}

// In a send, payload_bytes is the message's length; in an expected header, the bound.
WireHeader bounded_header(const Rank& r, int sender, uint32_t index, size_t payload_bytes) {
  WireHeader header = message_header(r, sender, 11, index, 0);
  header.count = kOpCount;
  header.flags = kWireFlagBoundedPayload;
  header.payload_bytes = payload_bytes;
  return header;
}

TEST_P(BoundedPayload, VariableLengthsArriveWithinTheBound) {
  const size_t bound = GetParam().bytes;
  run([&](Rank& r) {
    Transport& t = r.transport();
    const std::vector<size_t> sending = lengths_from(r.rank(), bound);
    const std::vector<size_t> receiving = lengths_from(r.prev(), bound);
    std::vector<std::unique_ptr<MessageBuffer>> in, out;
    std::vector<Handle> recvs, sends;
    for (uint32_t i = 0; i < kMessages; ++i) {
      in.push_back(std::make_unique<MessageBuffer>(t, bound + kGuardBytes, kUntouched));
      recvs.push_back(post_recv(r, r.prev(), 0, bounded_header(r, r.prev(), i, bound), *in[i]));
    }
    for (uint32_t i = 0; i < kMessages; ++i) {
      out.push_back(std::make_unique<MessageBuffer>(t, sending[i], 0));
      out[i]->write(pattern(r.rank(), r.next(), i, sending[i]));
      sends.push_back(
          post_send(r, r.next(), 0, bounded_header(r, r.rank(), i, sending[i]), *out[i]));
    }
    const std::vector<Finished> got = wait_all(t, recvs);
    const std::vector<Finished> sent = wait_all(t, sends);
    ASSERT_EQ(failures(got), "") << "rank " << r.rank() << ": receives";
    ASSERT_EQ(failures(sent), "") << "rank " << r.rank() << ": sends";
    for (uint32_t i = 0; i < kMessages; ++i) {
      const std::string what = "rank " + std::to_string(r.rank()) + " message " +
                               std::to_string(i) + " of " + std::to_string(receiving[i]) +
                               " bytes (bound " + std::to_string(bound) + ")";
      EXPECT_EQ(got[i].bytes, receiving[i]) << what << ": receive length";
      EXPECT_EQ(sent[i].bytes, sending[i]) << what << ": send length";
      const std::vector<unsigned char> bytes = in[i]->read();
      const std::vector<unsigned char> head(bytes.begin(), bytes.begin() + receiving[i]);
      EXPECT_TRUE(head == pattern(r.prev(), r.rank(), i, receiving[i])) << what;
      size_t touched = 0;
      for (size_t b = receiving[i]; b < bytes.size(); ++b) touched += bytes[b] != kUntouched;
      EXPECT_EQ(touched, 0u) << what << ": bytes beyond the message's length were written";
    }
    expect_clean_close(r);
  });
}

TEST_P(BoundedPayload, OverTheBoundIsRefusedOnBothSides) {
  const size_t bound = GetParam().bytes;
  run([&](Rank& r) {
    Transport& t = r.transport();
    if (r.rank() == 1) {
      MessageBuffer in(t, bound + kGuardBytes, kUntouched);
      const Finished got = wait_one(t, post_recv(r, 0, 0, bounded_header(r, 0, 0, bound), in));
      ASSERT_TRUE(got.done) << "rank 1: the over-long message's receive did not finish";
      EXPECT_EQ(got.status.code(), TIDEGATE_ERR_PROTOCOL) << got.status.to_string();
      for (const std::string& text :
           {std::string("'payload bytes'"), "bound of " + std::to_string(bound) + " bytes",
            std::to_string(bound + 1) + " bytes", std::string("rank 0")}) {
        EXPECT_TRUE(contains(got.status, text)) << "'" << text << "' in: " << got.status.message();
      }
      EXPECT_TRUE(in.read() == std::vector<unsigned char>(bound + kGuardBytes, kUntouched))
          << "bytes of the refused message were stored";
      EXPECT_EQ(wait_for_failure(t).code(), TIDEGATE_ERR_PROTOCOL) << "rank 1's transport";
      return;
    }
    // Rank 0 sends one byte over the bound; it and every other rank wait on a receive from
    // rank 1 that only the relayed failure can end.
    MessageBuffer out(t, bound + 1, 0x5a), never(t, 16, 0);
    std::vector<Handle> handles = {
        post_recv(r, 1, 0, message_header(r, 1, 8, 0, never.size()), never)};
    if (r.rank() == 0)
      handles.push_back(post_send(r, 1, 0, bounded_header(r, 0, 0, bound + 1), out));
    const Finished relayed = wait_all(t, handles)[0];
    ASSERT_TRUE(relayed.done) << "rank " << r.rank() << " did not learn of the refusal";
    EXPECT_EQ(relayed.status.code(), TIDEGATE_ERR_PROTOCOL) << relayed.status.to_string();
    EXPECT_TRUE(contains(relayed.status, "rank 1 aborted")) << relayed.status.message();
    EXPECT_TRUE(contains(relayed.status, "'payload bytes'")) << relayed.status.message();
    EXPECT_EQ(wait_for_failure(t).code(), TIDEGATE_ERR_PROTOCOL) << "rank " << r.rank();
  });
}

// One bound that every message of fits the eager paths, one far past them.
const std::vector<size_t> kBounds = {1023, (size_t{1} << 20) + 3};
TIDEGATE_CONFORMANCE_INSTANTIATE(BoundedPayload, kBounds);

}  // namespace
}  // namespace tidegate::conformance
