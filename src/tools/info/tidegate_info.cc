// tidegate-info: what this build has (version, transports, optional parts) and the
// configuration table with the values in effect. `--config-markdown` prints the table exactly
// as README.md carries it; `--json` prints one JSON object. The probe issue adds measured
// link figures and the plan table.
#include <cstdio>
#include <cstring>
#include <string>

#include "core/config.h"
#include "core/transport_registry.h"

namespace {

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
      continue;
    }
    out += c;
  }
  return out;
}

void print_json(const tidegate::Config& config) {
  std::printf("{\"version\":\"%s\",\"transports\":[", tidegate_version());
  const char* sep = "";
  for (const auto& t : tidegate::built_transports()) {
    std::printf("%s\"%s\"", sep, t.name);
    sep = ",";
  }
  std::printf("],\"config\":{");
  sep = "";
  for (const auto& e : tidegate::config_table()) {
    std::printf("%s\"%s\":{\"value\":\"%s\",\"default\":\"%s\"}", sep, e.env,
                json_escape(config.raw(e.env)).c_str(), json_escape(e.default_value).c_str());
    sep = ",";
  }
  std::printf("}}\n");
}

void print_text(const tidegate::Config& config) {
  std::printf("tidegate %s\n\ntransports built:", tidegate_version());
  for (const auto& t : tidegate::built_transports()) std::printf(" %s", t.name);
  std::printf("\n\nconfiguration (value in effect, default):\n");
  for (const auto& e : tidegate::config_table()) {
    std::printf("  %-34s %-12s (default %s)\n      %s\n", e.env,
                config.raw(e.env).empty() ? "(unset)" : config.raw(e.env).c_str(),
                e.default_value[0] ? e.default_value : "unset", e.meaning);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--config-markdown") == 0) {
      std::fputs(tidegate::config_table_markdown().c_str(), stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: tidegate-info [--json | --config-markdown]\n");
      return 2;
    }
  }
  tidegate::Config config;
  tidegate::Status st = tidegate::Config::from_environment(&config);
  if (!st.is_ok()) {
    std::fprintf(stderr, "tidegate-info: %s\n", st.to_string().c_str());
    return 1;
  }
  if (json) print_json(config);
  else print_text(config);
  return 0;
}
