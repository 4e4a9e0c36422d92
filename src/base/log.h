// Minimal leveled logging to stderr with a rank prefix. The level comes from the Config
// (TIDEGATE_LOG_LEVEL) of the most recently created communicator or tool.
#pragma once

#include <string>

namespace tidegate {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

void set_log_level(int level);
bool log_enabled(LogLevel level);
// Writes "tidegate[<who>] <level>: <message>\n" to stderr atomically (one write call).
void log_message(LogLevel level, const std::string& who, const std::string& message);

}  // namespace tidegate

#define TG_LOG(level, who, message)                                           \
  do {                                                                        \
    if (::tidegate::log_enabled(::tidegate::LogLevel::level))                 \
      ::tidegate::log_message(::tidegate::LogLevel::level, (who), (message)); \
  } while (0)
