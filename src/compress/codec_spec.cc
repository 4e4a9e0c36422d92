#include "compress/codec_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tidegate {

namespace {

std::string trim(const std::string& s) {
  const char* blanks = " \t\r\n";
  const size_t begin = s.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(blanks) - begin + 1);
}

std::string join(const std::vector<std::string>& items, const char* last_separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += (i + 1 == items.size()) ? last_separator : ", ";
    out += items[i];
  }
  return out;
}

std::string format_double(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

}  // namespace

Status CodecParams::parse(const std::string& spec, std::string* name, CodecParams* params) {
  params->spec_ = spec;
  params->values_.clear();
  params->known_.clear();
  const std::string quoted = "codec spec \"" + spec + "\": ";
  const size_t colon = spec.find(':');
  *name = trim(spec.substr(0, colon));
  if (name->empty())
    return config_error(
        quoted + "the codec name is missing (spec grammar: name[:key=value[,key=value]...])");
  if (colon == std::string::npos) return Status::ok();
  const std::string rest = spec.substr(colon + 1);
  size_t start = 0;
  while (true) {
    const size_t comma = rest.find(',', start);
    const std::string item =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t equals = item.find('=');
    const std::string key = trim(item.substr(0, equals));
    const std::string value = equals == std::string::npos ? "" : trim(item.substr(equals + 1));
    if (equals == std::string::npos || key.empty() || value.empty()) {
      return config_error(quoted + "\"" + trim(item) +
                          "\" is not key=value (spec grammar: name[:key=value[,key=value]...])");
    }
    if (params->find(key.c_str()) != nullptr)
      return config_error(quoted + "parameter \"" + key + "\" is given twice");
    params->values_.emplace_back(key, value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::ok();
}

const std::string* CodecParams::find(const char* key) const {
  for (const auto& [k, v] : values_) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool CodecParams::has(const char* key) const { return find(key) != nullptr; }

Status CodecParams::bad_value(const char* key, const std::string& value,
                              const std::string& accepted) const {
  return config_error("codec spec \"" + spec_ + "\": " + key + "=" + value + " is not accepted; " +
                      key + " takes " + accepted);
}

Status CodecParams::invalid(const char* key, const std::string& accepted) const {
  const std::string* value = find(key);
  return bad_value(key, value != nullptr ? *value : "(default)", accepted);
}

Status CodecParams::get_int(const char* key, int64_t default_value, int64_t min, int64_t max,
                            int64_t* out) {
  known_.emplace_back(key);
  const std::string* value = find(key);
  *out = default_value;
  if (value == nullptr) return Status::ok();
  const std::string accepted =
      "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  int64_t parsed = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (ec != std::errc() || ptr != end || parsed < min || parsed > max)
    return bad_value(key, *value, accepted);
  *out = parsed;
  return Status::ok();
}

Status CodecParams::get_int_choice(const char* key, int64_t default_value,
                                   std::initializer_list<int64_t> accepted, int64_t* out) {
  std::vector<std::string> names;
  int64_t min = INT64_MAX, max = INT64_MIN;
  for (int64_t a : accepted) {
    names.push_back(std::to_string(a));
    min = std::min(min, a);
    max = std::max(max, a);
  }
  Status st = get_int(key, default_value, min, max, out);
  bool listed = false;
  for (int64_t a : accepted) listed = listed || a == *out;
  if (!st.is_ok() || !listed) {
    const std::string* value = find(key);
    return bad_value(key, value != nullptr ? *value : std::to_string(default_value),
                     join(names, " or "));
  }
  return Status::ok();
}

Status CodecParams::get_double(const char* key, double default_value, double min, double max,
                               double* out) {
  known_.emplace_back(key);
  const std::string* value = find(key);
  *out = default_value;
  if (value == nullptr) return Status::ok();
  double parsed = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (ec != std::errc() || ptr != end || !std::isfinite(parsed) || parsed < min || parsed > max) {
    return bad_value(key, *value,
                     "a number from " + format_double(min) + " to " + format_double(max));
  }
  *out = parsed;
  return Status::ok();
}

Status CodecParams::get_choice(const char* key, const char* default_value,
                               std::initializer_list<const char*> accepted, std::string* out) {
  known_.emplace_back(key);
  const std::string* value = find(key);
  *out = value != nullptr ? *value : default_value;
  std::vector<std::string> names;
  for (const char* a : accepted) {
    if (*out == a) return Status::ok();
    names.emplace_back(a);
  }
  return bad_value(key, *out, join(names, " or "));
}

Status CodecParams::get_bool(const char* key, bool default_value, bool* out) {
  std::string text;
  TG_RETURN_IF_ERROR(get_choice(key, default_value ? "true" : "false",
                                {"true", "false", "1", "0", "yes", "no", "on", "off"}, &text));
  *out = text == "true" || text == "1" || text == "yes" || text == "on";
  return Status::ok();
}

Status CodecParams::finish() const {
  for (const auto& [key, value] : values_) {
    bool known = false;
    for (const auto& k : known_) known = known || k == key;
    if (known) continue;
    const std::string name = trim(spec_.substr(0, spec_.find(':')));
    return config_error("codec spec \"" + spec_ + "\": codec " + name + " has no parameter \"" +
                        key + "\"; " +
                        (known_.empty() ? std::string("it takes no parameters")
                                        : "it takes " + join(known_, " and ")));
  }
  return Status::ok();
}

}  // namespace tidegate
