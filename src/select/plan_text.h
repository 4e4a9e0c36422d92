// Text of the plans (plan.cc, codec_plan.cc): sizes, numbers and strings as their tables and
// JSON print them, locale-independent.
#pragma once

#include <cstdint>
#include <string>

namespace tidegate {

// Exact and short: 16K, 1M-1, 16K+1, 12345, inf.
std::string human_bytes(int64_t bytes);
// Shortest round-tripping text for JSON (null when not finite), or one decimal for a table.
std::string format_number(double value, bool one_decimal = false);
// A JSON string literal, quotes included, with '"', '\\' and control characters escaped.
std::string json_string(const std::string& text);

}  // namespace tidegate
