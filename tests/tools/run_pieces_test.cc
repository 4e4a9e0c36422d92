// Unit tests of tidegate-run's pieces: option parsing, the --wrap expansion and the line
// forwarder (through a pipe, as the launcher uses it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tools/tidegate_run/line_forwarder.h"
#include "tools/tidegate_run/run_options.h"

namespace tidegate::run {
namespace {

Status parse(std::vector<std::string> words, RunOptions* options, bool* help) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parse_run_options(static_cast<int>(argv.size()), argv.data(), options, help);
}

TEST(RunOptions, SplitsLauncherFlagsFromTheProgram) {
  RunOptions o;
  bool help = false;
  ASSERT_TRUE(parse({"tidegate-run", "-n", "4", "--host", "10.0.0.1", "--no-prefix", "--", "prog",
                     "-n", "7"},
                    &o, &help)
                  .is_ok());
  EXPECT_EQ(o.ranks, 4);
  EXPECT_EQ(o.host, "10.0.0.1");
  EXPECT_FALSE(o.prefix_output);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-n", "7"}));
}

TEST(RunOptions, ProgramMayFollowWithoutDoubleDash) {
  RunOptions o;
  bool help = false;
  ASSERT_TRUE(parse({"tidegate-run", "-n", "2", "prog", "--flag"}, &o, &help).is_ok());
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--flag"}));
}

TEST(RunOptions, RejectsMalformedValues) {
  RunOptions o;
  bool help = false;
  EXPECT_EQ(parse({"tidegate-run", "-n", "x", "--", "p"}, &o, &help).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(parse({"tidegate-run", "-n", "2", "--timeout-ms", "-1", "--", "p"}, &o, &help).code(),
            TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(parse({"tidegate-run", "-n"}, &o, &help).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_TRUE(parse({"tidegate-run", "--help"}, &o, &help).is_ok());
  EXPECT_TRUE(help);
}

TEST(RunOptions, ExpandWrapReplacesEveryRankPlaceholder) {
  EXPECT_EQ(expand_wrap("ip netns exec tgc-r{rank}", 3),
            (std::vector<std::string>{"ip", "netns", "exec", "tgc-r3"}));
  EXPECT_EQ(expand_wrap("a{rank}b{rank}  c", 12), (std::vector<std::string>{"a12b12", "c"}));
  EXPECT_TRUE(expand_wrap("", 0).empty());
}

// Feeds `chunks` through a forwarder writing into a pipe and returns what came out.
std::string forward(const std::vector<std::string>& chunks, const std::string& prefix) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  // Room for everything the forwarder writes, since it writes before this thread reads.
  EXPECT_GT(::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20), 0);
  {
    LineForwarder forwarder(fds[1], prefix);
    for (const std::string& c : chunks) forwarder.feed(c.data(), c.size());
    forwarder.finish();
  }
  ::close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, n);
  ::close(fds[0]);
  return out;
}

TEST(LineForwarder, JoinsChunksIntoPrefixedLines) {
  EXPECT_EQ(forward({"he", "llo\nwor", "ld\n\nend"}, "[1] "),
            "[1] hello\n[1] world\n[1] \n[1] end\n");
  EXPECT_EQ(forward({"x\n"}, ""), "x\n");
  EXPECT_EQ(forward({}, "[0] "), "");
}

TEST(LineForwarder, SplitsOverlongLines) {
  std::string longline(LineForwarder::kMaxLineBytes / 2, 'a');
  std::string out = forward({longline, longline, "tail\n"}, "p");
  EXPECT_EQ(out, "p" + longline + longline + "\np" + "tail\n");
}

}  // namespace
}  // namespace tidegate::run
