// A warning that may repeat without limit (a refused connection, once per connection of a
// flood) logged with a bound: the first `burst` events of each interval in full, the rest
// counted and summarised in one line ("... and 995 more like it in the last 10 s; the last:
// ..."). Not thread-safe: each user (an event loop, an acceptor) owns its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/log.h"
#include "base/types.h"

namespace tidegate {

class LogLimiter {
 public:
  // `what` names the event in the summary ("refused store connections").
  LogLimiter(LogLevel level, std::string who, std::string what, size_t burst = 5,
             Milliseconds interval = Milliseconds(10'000));
  ~LogLimiter() { flush(Clock::now(), /*force=*/true); }

  LogLimiter(const LogLimiter&) = delete;
  LogLimiter& operator=(const LogLimiter&) = delete;

  // One event: logged in full while the interval's burst lasts, counted otherwise.
  void log(const std::string& message, Clock::time_point now = Clock::now());
  // Logs the summary of the events counted in an interval that has ended (or, with `force`,
  // right away) and starts a new interval. Call it from a periodic tick and at the end.
  void flush(Clock::time_point now, bool force = false);
  // When the current interval ends (a loop's wait should not outlast it while events are
  // counted); Clock::time_point::max() when nothing is counted.
  Clock::time_point next_flush() const;

  uint64_t total() const { return total_; }            // events seen, logged or not
  uint64_t suppressed() const { return suppressed_; }  // events counted but not yet summarised

 private:
  LogLevel level_;
  std::string who_;
  std::string what_;
  size_t burst_;
  Milliseconds interval_;
  Clock::time_point interval_start_{};
  size_t logged_in_interval_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t total_ = 0;
  std::string last_suppressed_;
};

}  // namespace tidegate
