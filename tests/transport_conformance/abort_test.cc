// abort(): the aborting rank's pending and later transfers fail with the reason, a progress()
// blocked on another thread returns at once, and every other rank's pending and later
// transfers fail with the reason's code and a message naming the aborting rank.
#include <future>

#include "transfers.h"
#include "world_test.h"

namespace tidegate::conformance {
namespace {

class Abort : public WorldTest {};

// A code no transport produces on its own path here, so only the relayed reason can carry it.
constexpr tidegate_status_t kReasonCode = TIDEGATE_ERR_AUTH;
constexpr const char* kReasonText = "conformance: rank 0 gives up";

// A later transfer on a failed transport: refused at posting, or failed by test().
Status later_send(Rank& r, int peer) {
  MessageBuffer empty(r.transport(), 0, 0);
  Handle handle = 0;
  const Status posted =
      r.transport().isend(peer, 0, message_header(r, r.rank(), 99, 0, 0), empty.data(), 0, &handle);
  if (!posted.is_ok()) return posted;
  return wait_one(r.transport(), handle).status;
}

void expect_reason(const Status& st, const std::string& what) {
  EXPECT_EQ(st.code(), kReasonCode) << what << ": " << st.to_string();
  EXPECT_TRUE(contains(st, kReasonText)) << what << ": " << st.message();
}

TEST_P(Abort, ReasonReachesEveryRank) {
  run([&](Rank& r) {
    Transport& t = r.transport();
    MessageBuffer small(t, 64, 0), large(t, size_t{4} << 20, 0);
    if (r.rank() == 0) {
      const Handle pending = post_recv(r, 1, 0, message_header(r, 1, 1, 0, 64), small);
      r.barrier();  // every rank has posted its receives
      // The progress thread waits in progress() (returning only to wait again while it is
      // fine); abort() comes from this thread and must end the wait well before its 20 s.
      std::future<Status> blocked = std::async(std::launch::async, [&t] {
        const Deadline give_up = Deadline::after_ms(2 * kWaitMs);
        while (!give_up.passed()) {
          bool activity = false;
          Status st = t.progress(Milliseconds(kWaitMs), &activity);
          if (!st.is_ok()) return st;
        }
        return timeout_error("progress() never reported the abort");
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      t.abort(Status(kReasonCode, kReasonText));
      ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready)
          << "abort() did not end a progress() waiting on another thread";
      expect_reason(blocked.get(), "rank 0's blocked progress()");
      expect_reason(wait_one(t, pending).status, "rank 0's pending receive");
      expect_reason(later_send(r, 1), "rank 0's later send");
      t.abort(Status(kReasonCode, "a second abort changes nothing"));  // idempotent
      return;
    }
    // One receive from the aborting rank and, with three ranks or more, a large one from
    // another survivor that never sends it: both only end by the relayed abort.
    const int survivor = r.rank() == r.size() - 1 ? 1 : r.rank() + 1;
    std::vector<Handle> handles = {post_recv(r, 0, 0, message_header(r, 0, 1, 0, 64), small)};
    if (survivor != r.rank()) {
      handles.push_back(
          post_recv(r, survivor, 1, message_header(r, survivor, 1, 0, large.size()), large));
    }
    r.barrier();
    const std::vector<Finished> finished = wait_all(t, handles);
    for (size_t i = 0; i < finished.size(); ++i) {
      const std::string what = "rank " + std::to_string(r.rank()) +
                               "'s pending receive from rank " +
                               std::to_string(i == 0 ? 0 : survivor);
      ASSERT_TRUE(finished[i].done) << what << " did not fail";
      expect_reason(finished[i].status, what);
      EXPECT_TRUE(contains(finished[i].status, "rank 0")) << finished[i].status.message();
    }
    const Status later = later_send(r, survivor != r.rank() ? survivor : 0);
    expect_reason(later, "rank " + std::to_string(r.rank()) + "'s later send");
  });
}

TIDEGATE_CONFORMANCE_INSTANTIATE(Abort, {});

}  // namespace
}  // namespace tidegate::conformance
