#include "base/log_limiter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace tidegate {
namespace {

// What `body` writes to stderr.
template <typename Body>
std::string stderr_of(Body&& body) {
  char path[] = "/tmp/tidegate-log-XXXXXX";
  const int file = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  body();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

size_t lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(LogLimiter, LogsABurstThenOneSummaryPerInterval) {
  const Clock::time_point t0 = Clock::now();
  std::string text = stderr_of([&] {
    LogLimiter limiter(LogLevel::kWarn, "test", "refusals", 3, Milliseconds(1000));
    for (int i = 0; i < 100; ++i) limiter.log("refusal " + std::to_string(i), t0);
    EXPECT_EQ(limiter.total(), 100u);
    EXPECT_EQ(limiter.suppressed(), 97u);
    EXPECT_NE(limiter.next_flush(), Clock::time_point::max());
    limiter.flush(t0 + Milliseconds(500));  // the interval has not ended: nothing
    EXPECT_EQ(limiter.suppressed(), 97u);
    limiter.flush(t0 + Milliseconds(1500));
    EXPECT_EQ(limiter.suppressed(), 0u);
    limiter.log("after", t0 + Milliseconds(1600));  // a new interval: logged in full
  });
  EXPECT_EQ(lines(text), 5u) << text;
  EXPECT_NE(text.find("... and 97 more refusals"), std::string::npos) << text;
  EXPECT_NE(text.find("the last: refusal 99"), std::string::npos) << text;
  EXPECT_NE(text.find("after"), std::string::npos) << text;
}

TEST(LogLimiter, SummarisesWhatIsLeftWhenDestroyed) {
  std::string text = stderr_of([] {
    LogLimiter limiter(LogLevel::kWarn, "test", "events", 1);
    limiter.log("first");
    limiter.log("second");
  });
  EXPECT_EQ(lines(text), 2u) << text;
  EXPECT_NE(text.find("1 more events"), std::string::npos) << text;
}

}  // namespace
}  // namespace tidegate
