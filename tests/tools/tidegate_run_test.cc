// tidegate-run, end to end: each test starts the real launcher on small shell programs and
// checks what a user relies on - prefixes, the environment, exit codes, stopping a job when a
// rank fails, signal forwarding and the handling of the job secret.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <set>
#include <string>

#include "subprocess.h"

namespace tidegate::testing {
namespace {

using std::chrono::seconds;

std::vector<std::string> launcher(std::vector<std::string> options, const std::string& script) {
  std::vector<std::string> argv = {TIDEGATE_RUN_PATH};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"--", "sh", "-c", script});
  return argv;
}

std::set<std::string> line_set(const std::string& text) {
  auto lines = split_lines(text);
  return {lines.begin(), lines.end()};
}

TEST(TidegateRun, PrefixesEveryLineWithItsRank) {
  ProcessResult r = run_process(launcher({"-n", "3"}, "echo out $TIDEGATE_RANK; echo err >&2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(line_set(r.out), (std::set<std::string>{"[0] out 0", "[1] out 1", "[2] out 2"}));
  EXPECT_EQ(line_set(r.err), (std::set<std::string>{"[0] err", "[1] err", "[2] err"}));
}

TEST(TidegateRun, NoPrefixForwardsLinesAsTheyAre) {
  ProcessResult r = run_process(launcher({"-n", "2", "--no-prefix"}, "echo plain"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "plain\nplain\n");
}

TEST(TidegateRun, FlushesAPartialLastLine) {
  ProcessResult r = run_process(launcher({"-n", "1"}, "printf 'no newline'"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] no newline\n");
}

TEST(TidegateRun, GivesEveryRankItsEnvironment) {
  ProcessResult r = run_process(
      launcher({"-n", "3", "--timeout-ms", "4321"},
               "echo $TIDEGATE_RANK $TIDEGATE_SIZE $TIDEGATE_LOCAL_RANK $TIDEGATE_STORE_HOST "
               "$TIDEGATE_TIMEOUT_MS $TIDEGATE_STORE_ADDR"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> store_addresses;
  for (const std::string& line : split_lines(r.out)) {
    int rank = line.at(1) - '0';
    std::string expected = "[" + std::to_string(rank) + "] " + std::to_string(rank) + " 3 " +
                           std::to_string(rank) + " external 4321 127.0.0.1:";
    EXPECT_EQ(line.rfind(expected, 0), 0u) << line;
    store_addresses.insert(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_EQ(split_lines(r.out).size(), 3u);
  EXPECT_EQ(store_addresses.size(), 1u) << "every rank must get the same store address";
}

TEST(TidegateRun, DropsAnInheritedSecretSoTheJobsOwnIsUsed) {
  ProcessResult r = run_process(launcher({"-n", "1"}, "echo \"[${TIDEGATE_SECRET:-unset}]\""),
                                seconds(30), {"TIDEGATE_SECRET=stale", "TIDEGATE_RANK=9"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] [unset]\n");
}

TEST(TidegateRun, WrapPrefixesEachRanksCommand) {
  ProcessResult r =
      run_process(launcher({"-n", "2", "--wrap", "env TG_WRAPPED=w{rank}"}, "echo $TG_WRAPPED"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(line_set(r.out), (std::set<std::string>{"[0] w0", "[1] w1"}));
}

TEST(TidegateRun, ReturnsTheFailingRanksExitCode) {
  ProcessResult r = run_process(launcher({"-n", "3"}, "[ $TIDEGATE_RANK = 2 ] && exit 7; exit 0"));
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_NE(r.err.find("rank 2 exited with code 7"), std::string::npos) << r.err;
}

TEST(TidegateRun, ReportsARankKilledBySignalAs128PlusSignal) {
  ProcessResult r =
      run_process(launcher({"-n", "2"}, "[ $TIDEGATE_RANK = 1 ] && kill -9 $$; exit 0"));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
}

TEST(TidegateRun, AFailingRankStopsTheSleepingOnesQuickly) {
  ProcessResult r =
      run_process(launcher({"-n", "3"}, "[ $TIDEGATE_RANK = 1 ] && exit 3; sleep 60"), seconds(30));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 5.0) << "the sleeping ranks must get SIGTERM at once";
}

TEST(TidegateRun, RestartsAKilledRankWhileTheOthersGoOn) {
  // Rank 1's first process kills itself; the others must not be stopped (they finish their
  // sleep and print), and the second process of rank 1 is told it is a restart.
  ProcessResult r = run_process(
      launcher({"-n", "3", "--restarts", "1"},
               "if [ $TIDEGATE_RANK = 1 ] && [ -z \"$TIDEGATE_RESTART_COUNT\" ]; then kill -9 $$; "
               "fi; sleep 0.5; echo done $TIDEGATE_RANK ${TIDEGATE_RESTART_COUNT:-0} "
               "$TIDEGATE_STORE_ADDR"),
      seconds(30));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> finished, stores;
  for (const std::string& line : split_lines(r.out)) {
    const size_t store = line.rfind(' ');
    finished.insert(line.substr(0, store));
    stores.insert(line.substr(store + 1));
  }
  EXPECT_EQ(finished, (std::set<std::string>{"[0] done 0 0", "[1] done 1 1", "[2] done 2 0"}));
  EXPECT_EQ(stores.size(), 1u) << "the restarted rank must meet the same store";
  EXPECT_NE(r.err.find("rank 1 was killed by signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("starting it again (restart 1 of this rank"), std::string::npos) << r.err;
}

TEST(TidegateRun, StopsTheJobOnceItsRestartsAreSpent) {
  ProcessResult r = run_process(
      launcher({"-n", "2", "--restarts", "2"},
               "[ $TIDEGATE_RANK = 1 ] && exit 5; echo ${TIDEGATE_RESTART_COUNT:-0}; sleep 60"),
      seconds(30));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("restart 2 of this rank, 0 left"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 exited with code 5; stopping the other ranks"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "[0] 0\n") << "rank 0 must not be restarted: it never failed";
}

TEST(TidegateRun, EscalatesToSigkillWhenARankIgnoresSigterm) {
  // Rank 1 tells rank 0 through a fifo once it ignores SIGTERM; only then does rank 0 fail.
  char dir[] = "/tmp/tidegate-run-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/ready";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ProcessResult r =
      run_process(launcher({"-n", "2", "--grace-ms", "200"},
                           "if [ $TIDEGATE_RANK = 0 ]; then read -r line < \"$FIFO\"; exit 4; fi; "
                           "trap '' TERM; echo ready > \"$FIFO\"; while :; do sleep 1; done"),
                  seconds(30), {"FIFO=" + fifo});
  ::unlink(fifo.c_str());
  ::rmdir(dir);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

TEST(TidegateRun, ForwardsSigtermToTheRanks) {
  Subprocess job(launcher({"-n", "2"},
                          "trap 'echo stopping; exit 0' TERM; echo ready; "
                          "while :; do sleep 0.05; done"));
  ASSERT_TRUE(job.wait_for_stdout("[0] ready", seconds(20)));
  ASSERT_TRUE(job.wait_for_stdout("[1] ready", seconds(20)));
  job.signal(SIGTERM);
  ProcessResult r = job.finish(seconds(20));
  EXPECT_FALSE(r.timed_out);
  // The ranks exit 0 after their trap, but an interrupted job never reports success.
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_NE(r.out.find("stopping"), std::string::npos) << r.out;
}

TEST(TidegateRun, ForwardsSigintEvenWhenStartedWithItIgnored) {
  // A shell starts background commands with SIGINT ignored, and the ignoring is inherited;
  // the launcher must still receive SIGINT and hand the ranks a SIGINT they can trap.
  auto previous = std::signal(SIGINT, SIG_IGN);
  Subprocess job(launcher({"-n", "2"},
                          "trap 'echo interrupted; exit 5' INT; echo ready; "
                          "while :; do sleep 0.05; done"));
  std::signal(SIGINT, previous);
  ASSERT_TRUE(job.wait_for_stdout("[0] ready", seconds(20)));
  ASSERT_TRUE(job.wait_for_stdout("[1] ready", seconds(20)));
  job.signal(SIGINT);
  ProcessResult r = job.finish(seconds(20));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(line_set(r.out), (std::set<std::string>{"[0] ready", "[1] ready", "[0] interrupted",
                                                    "[1] interrupted"}));
}

TEST(TidegateRun, JobTimeoutStopsEverythingWith124) {
  ProcessResult r =
      run_process(launcher({"-n", "2", "--job-timeout-ms", "300"}, "sleep 60"), seconds(30));
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_LT(r.seconds, 5.0);
}

TEST(TidegateRun, SecretIsOnNoCommandLineAndInNoEnvironment) {
  // Each rank searches every process's command line and environment for the secret, using the
  // file as the pattern source so that grep's own command line does not contain it.
  const std::string script =
      "test $(wc -c < \"$TIDEGATE_SECRET_FILE\") -ge 32 || exit 9; "
      "n=$(cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | "
      "grep -c -F -f \"$TIDEGATE_SECRET_FILE\"); echo found $n";
  ProcessResult r = run_process(launcher({"-n", "3"}, script));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(line_set(r.out), (std::set<std::string>{"[0] found 0", "[1] found 0", "[2] found 0"}));
}

TEST(TidegateRun, SecretFileIsPrivateAndRemovedAtExit) {
  ProcessResult r = run_process(
      launcher({"-n", "1", "--no-prefix"},
               "stat -c '%a %F' \"$TIDEGATE_SECRET_FILE\"; echo \"$TIDEGATE_SECRET_FILE\""));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = split_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0], "600 regular file");
  struct stat st {};
  EXPECT_NE(::stat(lines[1].c_str(), &st), 0) << lines[1] << " must be gone after the job";
}

TEST(TidegateRun, MissingProgramIs127) {
  ProcessResult r = run_process({TIDEGATE_RUN_PATH, "-n", "2", "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("/nonexistent/program"), std::string::npos) << r.err;
}

TEST(TidegateRun, BadCommandLineIs2WithUsage) {
  for (auto argv : std::vector<std::vector<std::string>>{
           {TIDEGATE_RUN_PATH, "--", "true"},
           {TIDEGATE_RUN_PATH, "-n", "0", "--", "true"},
           {TIDEGATE_RUN_PATH, "-n", "2"},
           {TIDEGATE_RUN_PATH, "-n", "2", "--bogus", "--", "true"},
           {TIDEGATE_RUN_PATH, "-n", "2", "--restarts", "-1", "--", "true"}}) {
    ProcessResult r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << argv[1];
    EXPECT_NE(r.err.find("usage: tidegate-run"), std::string::npos);
  }
}

}  // namespace
}  // namespace tidegate::testing
