#include "api/settings_agreement.h"

#include <openssl/sha.h>

#include <cstdint>
#include <sstream>
#include <string>

namespace tidegate {

namespace {

struct AgreedSetting {
  const char* env;
  bool text;  // compared by hash; the message then quotes this rank's text
};

// In token order. Numeric settings are compared by their parsed value, so "1M" and "1048576"
// agree.
const AgreedSetting kSettings[] = {
    {"TIDEGATE_OPS_IN_FLIGHT", false},
    {"TIDEGATE_SEGMENT_BYTES", false},
    {"TIDEGATE_REPLAN_INTERVAL", false},
    {"TIDEGATE_REPLAN_MARGIN", false},
    {"TIDEGATE_ALLREDUCE_RD_MAX_BYTES", false},
    {"TIDEGATE_ALLREDUCE_RING_MIN_BYTES", false},
    {"TIDEGATE_FUSION_BYTES", false},
    {"TIDEGATE_CHUNK_BYTES", false},
    {"TIDEGATE_SEED", true},  // 64 bits: more than a double holds exactly
    {"TIDEGATE_ALGO", true},
    {"TIDEGATE_TUNE", true},
};

double text_hash(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  uint64_t bits = 0;
  for (int i = 0; i < 6; ++i) bits = (bits << 8) | digest[i];
  return static_cast<double>(bits);
}

double numeric_value(const Config& config, const std::string& env) {
  if (env == "TIDEGATE_OPS_IN_FLIGHT") return static_cast<double>(config.ops_in_flight());
  if (env == "TIDEGATE_SEGMENT_BYTES") return static_cast<double>(config.segment_bytes());
  if (env == "TIDEGATE_REPLAN_INTERVAL") return static_cast<double>(config.replan_interval());
  if (env == "TIDEGATE_REPLAN_MARGIN") return config.replan_margin();
  if (env == "TIDEGATE_ALLREDUCE_RD_MAX_BYTES") {
    return static_cast<double>(config.recursive_doubling_max_bytes());
  }
  if (env == "TIDEGATE_ALLREDUCE_RING_MIN_BYTES") {
    return static_cast<double>(config.ring_min_bytes());
  }
  if (env == "TIDEGATE_FUSION_BYTES") return static_cast<double>(config.fusion_bytes());
  return static_cast<double>(config.chunk_bytes());  // TIDEGATE_CHUNK_BYTES
}

double value_of(const Config& config, const AgreedSetting& setting) {
  const std::string env = setting.env;
  // The seed as parsed, so that "7" and "07" agree.
  if (env == "TIDEGATE_SEED") return text_hash(std::to_string(config.codec_seed()));
  return setting.text ? text_hash(config.raw(env)) : numeric_value(config, env);
}

std::string shown(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

void append_settings_to_agree(const Config& config, std::vector<double>* token) {
  for (const AgreedSetting& setting : kSettings) {
    const double value = value_of(config, setting);
    token->push_back(value);
    token->push_back(-value);
  }
}

Status check_settings_agree(const Config& config, const std::vector<double>& token, size_t first) {
  size_t at = first;
  for (const AgreedSetting& setting : kSettings) {
    const double largest = token.at(at);
    const double smallest = -token.at(at + 1);
    at += 2;
    if (largest == smallest) continue;
    const std::string env = setting.env;
    std::string detail;
    if (setting.text) {
      detail = "this rank has '" + config.raw(env) + "'";
    } else {
      detail = "this rank has " + shown(numeric_value(config, env)) + ", the ranks range from " +
               shown(smallest) + " to " + shown(largest);
    }
    return config_error(env + " differs between the ranks of this communicator (" + detail +
                        "); every rank must set it the same");
  }
  return Status::ok();
}

}  // namespace tidegate
