// The paced exit watch (transports/tcp/paced_exit_watch.h) that the mpi and nccl transports
// hold: started together on every rank, it names a peer whose process ended only a grace
// period after it saw the exit (so that an op the dead peer's last messages complete does not
// fail), and never a peer that said goodbye. The real kill is the fault tests'
// (faults.mpi.*.kill_recovery); the nccl transport cannot be run without GPUs.
#include "transports/tcp/paced_exit_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tcp_test_util.h"

namespace tidegate::tcp {
namespace {

// Every rank's watch, started together.
struct PacedWatches : tcp_testing::RankObjects<PacedExitWatch> {
  explicit PacedWatches(int size)
      : RankObjects(size, "paced-exit-watch-test",
                    [](const TransportContext& context, std::unique_ptr<PacedExitWatch>* out) {
                      return PacedExitWatch::start(context, "test", out);
                    }) {
    for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
};

constexpr auto kGrace = Milliseconds(PacedExitWatch::kGraceMs);
constexpr auto kCheck = Milliseconds(PacedExitWatch::kCheckMs);

TEST(PacedExitWatch, NamesALostPeerOnlyOnceTheGraceHasPassed) {
  PacedWatches w(3);
  for (auto& watch : w.objects) ASSERT_NE(watch, nullptr);
  w.objects[2].reset();  // its sockets close as a dead process's would: no goodbye
  // Local closes arrive at once; give them ample time so the first look below sees them.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int survivor : {0, 1}) {
    PacedExitWatch& watch = *w.objects[static_cast<size_t>(survivor)];
    const Clock::time_point seen = Clock::now();
    EXPECT_TRUE(watch.poll(seen).is_ok()) << "the exit is seen here; the grace starts";
    EXPECT_TRUE(watch.poll(seen + kGrace - Milliseconds(1)).is_ok()) << "still in the grace";
    const Status lost = watch.poll(seen + kGrace);
    EXPECT_EQ(lost.code(), TIDEGATE_ERR_PEER_FAILED) << lost.to_string();
    EXPECT_NE(lost.message().find("rank 2's process has ended"), std::string::npos)
        << lost.message();
    // The verdict stays: the owner may poll again before it has failed.
    EXPECT_EQ(watch.poll(seen + 2 * kGrace).code(), TIDEGATE_ERR_PEER_FAILED);
  }
}

TEST(PacedExitWatch, LooksAtTheSocketsAtMostEveryCheckInterval) {
  PacedWatches w(2);
  const Clock::time_point first = Clock::now();
  ASSERT_TRUE(w.objects[0]->poll(first).is_ok());  // looked: nobody had gone
  w.objects[1].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Within the check interval of the last look, the sockets are not looked at: no grace
  // starts, so even a time far past it gives no verdict yet.
  ASSERT_TRUE(w.objects[0]->poll(first + kCheck - Milliseconds(1)).is_ok());
  const Clock::time_point next = first + kCheck;
  ASSERT_TRUE(w.objects[0]->poll(next).is_ok());  // looked: the exit is seen now
  EXPECT_TRUE(w.objects[0]->poll(next + kGrace - Milliseconds(1)).is_ok());
  EXPECT_EQ(w.objects[0]->poll(next + kGrace).code(), TIDEGATE_ERR_PEER_FAILED);
}

TEST(PacedExitWatch, APeerThatSaidGoodbyeIsNeverNamed) {
  PacedWatches w(3);
  w.objects[2]->say_goodbye();
  w.objects[2].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int survivor : {0, 1}) {
    Clock::time_point t = Clock::now();
    for (int look = 0; look < 5; ++look, t += kGrace + kCheck) {
      const Status st = w.objects[static_cast<size_t>(survivor)]->poll(t);
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    }
  }
}

}  // namespace
}  // namespace tidegate::tcp
