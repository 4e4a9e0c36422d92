#include "select/plan_text.h"

#include <charconv>
#include <cmath>
#include <utility>

namespace tidegate {

// Exact and short: 16K, 1M-1, 16K+1, 12345, inf.
std::string human_bytes(int64_t bytes) {
  if (bytes == INT64_MAX) return "inf";
  static const std::pair<int64_t, const char*> kUnits[] = {
      {int64_t{1} << 30, "G"}, {int64_t{1} << 20, "M"}, {int64_t{1} << 10, "K"}};
  for (const auto& [unit, suffix] : kUnits) {
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
    if (bytes + 1 >= unit && (bytes + 1) % unit == 0)
      return std::to_string((bytes + 1) / unit) + suffix + "-1";
    if (bytes - 1 >= unit && (bytes - 1) % unit == 0)
      return std::to_string((bytes - 1) / unit) + suffix + "+1";
  }
  return std::to_string(bytes);
}

// Locale-independent, unlike printf: shortest round-tripping text for JSON (null when not
// finite), one decimal for the table.
std::string format_number(double value, bool one_decimal) {
  if (!std::isfinite(value)) return "null";
  char buffer[400];  // fixed notation of DBL_MAX needs 310 characters
  auto result = one_decimal ? std::to_chars(buffer, buffer + sizeof buffer, value,
                                            std::chars_format::fixed, 1)
                            : std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    static const char kHex[] = "0123456789abcdef";
    if (c == '"' || c == '\\')
      out += {'\\', static_cast<char>(c)};
    else if (c < 0x20)
      out += {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace tidegate
