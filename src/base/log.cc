#include "base/log.h"

#include <unistd.h>

#include <atomic>

namespace tidegate {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}
}  // namespace

void set_log_level(int level) { g_level.store(level); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void log_message(LogLevel level, const std::string& who, const std::string& message) {
  std::string line = "tidegate[" + who + "] " + level_name(level) + ": " + message + "\n";
  // One write() so lines from concurrent ranks/threads do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace tidegate
