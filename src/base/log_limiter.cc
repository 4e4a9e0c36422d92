#include "base/log_limiter.h"

#include <utility>

namespace tidegate {

LogLimiter::LogLimiter(LogLevel level, std::string who, std::string what, size_t burst,
                       Milliseconds interval)
    : level_(level),
      who_(std::move(who)),
      what_(std::move(what)),
      burst_(burst),
      interval_(interval),
      interval_start_(Clock::now()) {}

void LogLimiter::log(const std::string& message, Clock::time_point now) {
  ++total_;
  flush(now);
  if (logged_in_interval_ < burst_) {
    ++logged_in_interval_;
    if (log_enabled(level_)) log_message(level_, who_, message);
    return;
  }
  ++suppressed_;
  last_suppressed_ = message;
}

void LogLimiter::flush(Clock::time_point now, bool force) {
  if (!force && now - interval_start_ < interval_) return;
  if (suppressed_ > 0 && log_enabled(level_)) {
    const auto seconds =
        std::chrono::duration_cast<std::chrono::seconds>(now - interval_start_).count();
    log_message(level_, who_,
                "... and " + std::to_string(suppressed_) + " more " + what_ + " in the last " +
                    std::to_string(seconds) + " s (" + std::to_string(total_) +
                    " in all); the last: " + last_suppressed_);
  }
  suppressed_ = 0;
  last_suppressed_.clear();
  logged_in_interval_ = 0;
  interval_start_ = now;
}

Clock::time_point LogLimiter::next_flush() const {
  return suppressed_ > 0 ? interval_start_ + interval_ : Clock::time_point::max();
}

}  // namespace tidegate
