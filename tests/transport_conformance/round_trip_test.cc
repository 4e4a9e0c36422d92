// Round trip: every rank sends one message to the next rank of a ring and receives one from
// the previous, at payload sizes from empty to 8 MiB (past every transport's eager limit and
// the TCP transport's striping threshold). The bytes arrive unchanged and test() reports the
// payload length of both the send and the receive.
#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

class RoundTrip : public WorldTest {};

TEST_P(RoundTrip, RingExchange) {
  const size_t bytes = GetParam().bytes;
  run([&](Rank& r) {
    MessageBuffer in(r.transport(), bytes, 0xcd);
    MessageBuffer out(r.transport(), bytes, 0);
    out.write(pattern(r.rank(), r.next(), 0, bytes));
    const Handle recv = post_recv(r, r.prev(), 0, message_header(r, r.prev(), 1, 0, bytes), in);
    const Handle send = post_send(r, r.next(), 0, message_header(r, r.rank(), 1, 0, bytes), out);
    const std::vector<Finished> finished = wait_all(r.transport(), {recv, send});
    ASSERT_EQ(failures(finished), "") << "rank " << r.rank();
    EXPECT_EQ(finished[0].bytes, bytes) << "rank " << r.rank() << ": receive length";
    EXPECT_EQ(finished[1].bytes, bytes) << "rank " << r.rank() << ": send length";
    EXPECT_TRUE(in.read() == pattern(r.prev(), r.rank(), 0, bytes))
        << "rank " << r.rank() << " received wrong bytes from rank " << r.prev();
    expect_clean_close(r);
  });
}

const std::vector<size_t> kSizes = {0, 1, 7, 1023, (size_t{1} << 20) + 3, size_t{8} << 20};
TIDEGATE_CONFORMANCE_INSTANTIATE(RoundTrip, kSizes);

}  // namespace
}  // namespace tidegate::conformance
