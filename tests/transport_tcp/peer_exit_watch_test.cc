// The exit watch (transports/tcp/peer_exit_watch.h): a peer whose connections close without a
// goodbye (as a killed process's do: its kernel closes them) is named; one that says goodbye
// is not. The real kill under mpirun is the fault tests' (faults.mpi.*.kill_recovery).
#include "transports/tcp/peer_exit_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tcp_test_util.h"

namespace tidegate::tcp {
namespace {

using tcp_testing::run_ranks;

// Every rank's watch, built together.
struct Watches : tcp_testing::RankObjects<PeerExitWatch> {
  explicit Watches(int size) : RankObjects(size, "exit-watch-test", PeerExitWatch::create) {
    for (const Status& st : statuses) EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
};

// check() until it reports something or `ms` pass.
Status check_for(PeerExitWatch& watch, int64_t ms) {
  const Deadline until = Deadline::after_ms(ms);
  while (!until.passed()) {
    Status st = watch.check();
    if (!st.is_ok()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return Status::ok();
}

TEST(PeerExitWatch, QuietPeersAreNotReported) {
  Watches w(3);
  for (auto& watch : w.objects) {
    ASSERT_NE(watch, nullptr);
    EXPECT_EQ(watch->watched(), 2);
    EXPECT_TRUE(check_for(*watch, 50).is_ok());
  }
}

TEST(PeerExitWatch, NamesAPeerWhoseConnectionsCloseWithoutAGoodbye) {
  Watches w(3);
  w.objects[2].reset();  // its sockets close as a dead process's would: no goodbye
  for (int survivor : {0, 1}) {
    Status st = check_for(*w.objects[static_cast<size_t>(survivor)], 5000);
    EXPECT_EQ(st.code(), TIDEGATE_ERR_PEER_FAILED) << st.to_string();
    EXPECT_NE(st.message().find("rank 2's process has ended"), std::string::npos) << st.message();
    // Named once; the other peer stays watched and quiet.
    EXPECT_EQ(w.objects[static_cast<size_t>(survivor)]->watched(), 1);
    EXPECT_TRUE(check_for(*w.objects[static_cast<size_t>(survivor)], 20).is_ok());
  }
}

TEST(PeerExitWatch, AGoodbyeIsNotAnExit) {
  Watches w(3);
  w.objects[2]->say_goodbye();
  EXPECT_EQ(w.objects[2]->watched(), 0);
  w.objects[2].reset();
  for (int survivor : {0, 1}) {
    PeerExitWatch& watch = *w.objects[static_cast<size_t>(survivor)];
    const Deadline until = Deadline::after_ms(5000);
    while (watch.watched() == 2 && !until.passed()) {
      Status st = watch.check();
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(watch.watched(), 1);  // rank 2 is no longer watched, and was not reported
  }
}

TEST(PeerExitWatch, BothSidesSayingGoodbyeAtOnceIsNoExit) {
  // Ranks leaving together: each may close while the other's goodbye is still unread.
  for (int round = 0; round < 20; ++round) {
    Watches w(2);
    run_ranks(2, [&](int rank) {
      if (rank == 1) w.objects[1]->say_goodbye();
      Status st = check_for(*w.objects[0], rank == 0 ? 20 : 0);
      EXPECT_TRUE(st.is_ok()) << "round " << round << ": " << st.to_string();
      if (rank == 0) w.objects[0]->say_goodbye();
    });
  }
}

}  // namespace
}  // namespace tidegate::tcp
