// The receiver's header check: ranks that posted different collectives fail at the first
// message with a MISMATCH naming the field and both ranks, before any payload byte is stored;
// the receiver's transport then fails as a whole and relays the root cause to every peer, so
// the sender (and everyone else) ends in that error too, never a hang.
#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

class HeaderCheck : public WorldTest {};

constexpr size_t kBytes = 4096;
constexpr int64_t kSentCount = 1024;
constexpr int64_t kExpectedCount = 1023;

// Rank 1 expects count=1023 from rank 0, which sends count=1024 (the same byte length).
TEST_P(HeaderCheck, CountMismatchFailsBothSidesNamingTheField) {
  run([&](Rank& r) {
    Transport& t = r.transport();
    if (r.rank() == 1) {
      MessageBuffer in(t, kBytes, 0xab);
      WireHeader expected = message_header(r, 0, 7, 0, kBytes);
      expected.count = kExpectedCount;
      const Finished got = wait_one(t, post_recv(r, 0, 0, expected, in));
      ASSERT_TRUE(got.done) << "rank 1: the mismatching receive did not finish";
      EXPECT_EQ(got.status.code(), TIDEGATE_ERR_MISMATCH) << got.status.to_string();
      for (const char* text : {"'count'", "rank 0", "rank 1", "count=1023", "count=1024"}) {
        EXPECT_TRUE(contains(got.status, text)) << "'" << text << "' in: " << got.status.message();
      }
      EXPECT_TRUE(in.read() == std::vector<unsigned char>(kBytes, 0xab))
          << "payload bytes were stored although the header did not match";
      EXPECT_EQ(wait_for_failure(t).code(), TIDEGATE_ERR_MISMATCH) << "rank 1's transport";
      return;
    }
    // Rank 0 sends the message; it and every other rank also wait on a receive from rank 1
    // that rank 1 never sends, which only the relayed failure can end.
    MessageBuffer out(t, kBytes, 0x5a), never(t, 16, 0);
    std::vector<Handle> handles = {
        post_recv(r, 1, 0, message_header(r, 1, 8, 0, never.size()), never)};
    if (r.rank() == 0) {
      WireHeader sent = message_header(r, 0, 7, 0, kBytes);
      sent.count = kSentCount;
      handles.push_back(post_send(r, 1, 0, sent, out));
    }
    const Finished relayed = wait_all(t, handles)[0];
    ASSERT_TRUE(relayed.done) << "rank " << r.rank() << " did not learn of rank 1's mismatch";
    EXPECT_EQ(relayed.status.code(), TIDEGATE_ERR_MISMATCH) << relayed.status.to_string();
    EXPECT_TRUE(contains(relayed.status, "rank 1 aborted")) << relayed.status.message();
    EXPECT_TRUE(contains(relayed.status, "'count'")) << relayed.status.message();
    EXPECT_EQ(wait_for_failure(t).code(), TIDEGATE_ERR_MISMATCH) << "rank " << r.rank();
  });
}

TIDEGATE_CONFORMANCE_INSTANTIATE(HeaderCheck, {});

}  // namespace
}  // namespace tidegate::conformance
