#include "select/tune.h"

#include "base/config.h"

namespace tidegate {

namespace {

constexpr OpKind kTunableKinds[] = {OpKind::kAllreduce,  OpKind::kReduceScatter, OpKind::kAllgather,
                                    OpKind::kAllgatherv, OpKind::kBroadcast,     OpKind::kBarrier,
                                    OpKind::kAlltoallv};

// Splits on `sep`, keeping empty pieces (so "a##b" and a trailing '#' are seen as errors).
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

Status rule_error(const std::string& rule, const std::string& what) {
  return config_error("TIDEGATE_TUNE rule '" + rule + "' " + what);
}

std::string collective_list() {
  std::string names = "all";
  for (OpKind kind : kTunableKinds) names += std::string(", ") + op_kind_name(kind);
  return names;
}

// A name of a transport or algorithm: lowercase letters, digits and '_', starting with a
// letter. Anything else (upper case, '=', spaces) is an unknown field rather than a name.
bool is_name(const std::string& text) {
  if (text.empty() || text[0] < 'a' || text[0] > 'z') return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

Status parse_target(const std::string& target, const std::string& rule, TuneRule* out) {
  if (target == "all") return Status::ok();
  for (OpKind kind : kTunableKinds) {
    if (target == op_kind_name(kind)) {
      out->kind = kind;
      return Status::ok();
    }
  }
  return rule_error(rule, "starts with '" + target + "', which is not a collective (expected " +
                              collective_list() + ")");
}

Status parse_range(const std::string& field, const std::string& rule, TuneRule* out) {
  const std::string expected = " (expected a size range such as 0-64K or 1M-inf)";
  size_t dash = field.find('-');
  if (dash == std::string::npos) {
    return rule_error(rule, "has '" + field + "', which is not a size range" + expected);
  }
  std::string low = field.substr(0, dash);
  std::string high = field.substr(dash + 1);
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;
  if (!parse_byte_size(low, &min_bytes)) {
    return rule_error(
        rule, "has '" + field + "', whose lower bound '" + low + "' is not a size" + expected);
  }
  if (high != "inf" && !parse_byte_size(high, &max_bytes)) {
    return rule_error(rule, "has '" + field + "', whose upper bound '" + high +
                                "' is not a size or inf" + expected);
  }
  if (min_bytes > max_bytes) {
    return rule_error(rule, "has an empty size range (" + low + " > " + high + ")");
  }
  out->min_bytes = min_bytes;
  out->max_bytes = max_bytes;
  return Status::ok();
}

// One field after the target; `seen` records which kinds of field the rule already has, so
// that "allreduce:tcp:mpi" is an error instead of a silent last-one-wins.
Status parse_field(const std::string& field, const std::string& rule, std::string* seen,
                   TuneRule* out) {
  auto once = [&](char kind, const char* what) -> Status {
    if (seen->find(kind) != std::string::npos) {
      return rule_error(rule, std::string("has more than one ") + what + " ('" + field + "')");
    }
    seen->push_back(kind);
    return Status::ok();
  };
  if (field.empty())
    return rule_error(rule,
                      "has an empty field (expected range, host, cuda, "
                      "a transport name or @algorithm)");
  if (field[0] == '@') {
    TG_RETURN_IF_ERROR(once('a', "algorithm"));
    std::string name = field.substr(1);
    if (!is_name(name)) {
      return rule_error(rule, "has '" + field + "', which is not @algorithm (e.g. @ring)");
    }
    out->algorithm = name;
    return Status::ok();
  }
  if (field[0] >= '0' && field[0] <= '9') {
    TG_RETURN_IF_ERROR(once('r', "size range"));
    return parse_range(field, rule, out);
  }
  if (field == "host" || field == "cuda") {
    TG_RETURN_IF_ERROR(once('m', "memory kind"));
    out->memory = field == "host" ? TIDEGATE_MEMORY_HOST : TIDEGATE_MEMORY_CUDA;
    return Status::ok();
  }
  if (is_name(field)) {
    TG_RETURN_IF_ERROR(once('t', "transport"));
    out->transport = field;  // checked against the available transports by Plan::build
    return Status::ok();
  }
  return rule_error(rule, "has an unknown field '" + field +
                              "' (expected a size range such as 0-64K, host, cuda, a transport "
                              "name such as tcp, or @algorithm)");
}

Status parse_rule(const std::string& rule, TuneRule* out) {
  if (rule.empty()) {
    return config_error("TIDEGATE_TUNE has an empty rule (rules are separated by a single '#')");
  }
  out->text = rule;
  // A codec field runs to the end of the rule: its spec may hold ':'.
  std::string head = rule;
  const size_t codec = rule.find(":codec=");
  if (codec != std::string::npos) {
    out->codec = rule.substr(codec + 7);
    head = rule.substr(0, codec);
    if (out->codec.empty()) return rule_error(rule, "has 'codec=' without a codec spec");
  }
  std::vector<std::string> fields = split(head, ':');
  TG_RETURN_IF_ERROR(parse_target(fields[0], rule, out));
  if (fields.size() < 2 && out->codec.empty()) {
    return rule_error(rule, "has no field after the collective (expected e.g. '" + fields[0] +
                                ":0-64K:@recursive_doubling')");
  }
  std::string seen;
  for (size_t i = 1; i < fields.size(); ++i) {
    TG_RETURN_IF_ERROR(parse_field(fields[i], rule, &seen, out));
  }
  return Status::ok();
}

}  // namespace

Status parse_tune(const std::string& text, std::vector<TuneRule>* rules) {
  rules->clear();
  if (text.empty()) return Status::ok();
  std::vector<TuneRule> parsed;
  for (const std::string& rule : split(text, '#')) {
    TuneRule one;
    TG_RETURN_IF_ERROR(parse_rule(rule, &one));
    parsed.push_back(std::move(one));
  }
  *rules = std::move(parsed);
  return Status::ok();
}

}  // namespace tidegate
