// test() knows only live handles: 0, one never issued, and one already reported finished
// (released by that report) are INVALID_ARGUMENT. Empty messages complete with length 0.
#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

class Handles : public WorldTest {};

TEST_P(Handles, TestOfAnUnknownHandleIsInvalidArgument) {
  run([&](Rank& r) {
    Transport& t = r.transport();
    MessageBuffer in(t, 0, 0), out(t, 0, 0);
    const Handle recv = post_recv(r, r.prev(), 0, message_header(r, r.prev(), 1, 0, 0), in);
    const Handle send = post_send(r, r.next(), 0, message_header(r, r.rank(), 1, 0, 0), out);
    const std::vector<Finished> finished = wait_all(t, {recv, send});
    ASSERT_EQ(failures(finished), "") << "rank " << r.rank() << ": empty messages";
    EXPECT_EQ(finished[0].bytes, 0u);
    EXPECT_EQ(finished[1].bytes, 0u);
    for (const Handle unknown : {recv, send, Handle{0}, recv + send + 1000003}) {
      bool done = false;
      const Status st = t.test(unknown, &done);
      EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT)
          << "rank " << r.rank() << ": test(" << unknown << "): " << st.to_string();
    }
    expect_clean_close(r);
  });
}

TIDEGATE_CONFORMANCE_INSTANTIATE(Handles, {});

}  // namespace
}  // namespace tidegate::conformance
