// The configuration table: every knob tidegate reads is declared here once (name, environment
// variable, default, meaning). Config::from_environment() is the only place in the library
// that reads the environment; everything else receives a Config. tidegate-info prints the
// table and README.md's copy is checked against it by a test.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate {

struct ConfigEntry {
  const char* env;            // environment variable, e.g. "TIDEGATE_TIMEOUT_MS"
  const char* default_value;  // textual default ("" = unset)
  const char* meaning;        // one sentence for users
};

// The whole table, in display order.
const std::vector<ConfigEntry>& config_table();

// Renders the table as a Markdown table (used by tidegate-info --markdown and the README test).
std::string config_table_markdown();

class Config {
 public:
  // All defaults from the table.
  Config();

  // Defaults overridden by the environment variables that are set. Validates every value, so
  // a malformed variable is an error at communicator creation, naming the variable.
  static Status from_environment(Config* out);

  // Raw textual value (default if not overridden). Unknown names are an internal error.
  const std::string& raw(const std::string& env) const;
  // Programmatic override (tests, launcher); validated like the environment.
  Status set(const std::string& env, const std::string& value);

  // Typed accessors, valid after validation.
  int64_t timeout_ms() const { return timeout_ms_; }
  int tcp_streams() const { return tcp_streams_; }
  int64_t tcp_buffer_bytes() const { return tcp_buffer_bytes_; }
  int64_t segment_bytes() const { return segment_bytes_; }
  int64_t recursive_doubling_max_bytes() const { return rd_max_bytes_; }
  int64_t ring_min_bytes() const { return ring_min_bytes_; }
  int log_level() const { return log_level_; }  // 0 error, 1 warn, 2 info, 3 debug
  bool probe_enabled() const { return probe_enabled_; }
  bool exit_watch() const { return exit_watch_; }
  int64_t probe_budget_ms() const { return probe_budget_ms_; }
  int64_t replan_interval() const { return replan_interval_; }  // 0 = never
  double replan_margin() const { return replan_margin_; }
  int64_t spin_us() const { return spin_us_; }
  bool caller_runs() const { return caller_runs_; }
  bool native_prediction() const { return native_prediction_; }
  int64_t ops_in_flight() const { return ops_in_flight_; }
  uint64_t codec_seed() const { return codec_seed_; }
  // Gradient session knobs: 0 = auto (from the plan), -1 = off.
  int64_t fusion_bytes() const { return fusion_bytes_; }
  int64_t chunk_bytes() const { return chunk_bytes_; }
  int64_t session_cycle_us() const { return session_cycle_us_; }
  int64_t store_max_bytes() const { return store_max_bytes_; }
  int64_t store_max_keys() const { return store_max_keys_; }

  // Variables set by job launchers (Open MPI, PMI, Slurm), captured by from_environment() so
  // that rank discovery needs no getenv of its own: "" when unset or not a launcher variable.
  std::string launcher_variable(const std::string& name) const;
  static const std::vector<std::string>& launcher_variable_names();

  // Forced algorithm for a collective ("allreduce" -> "ring"), or "" when the rule decides.
  std::string forced_algorithm(const std::string& collective) const;

 private:
  Status validate_and_cache();

  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> launcher_values_;
  int64_t timeout_ms_ = 0;
  int tcp_streams_ = 1;
  int64_t tcp_buffer_bytes_ = 0;
  int64_t segment_bytes_ = 0;
  int64_t rd_max_bytes_ = 0;
  int64_t ring_min_bytes_ = 0;
  int log_level_ = 1;
  bool probe_enabled_ = true;
  bool exit_watch_ = true;
  int64_t probe_budget_ms_ = 800;
  int64_t replan_interval_ = 64;
  double replan_margin_ = 0.25;
  int64_t spin_us_ = 100;
  bool caller_runs_ = true;
  bool native_prediction_ = true;
  int64_t ops_in_flight_ = 4;
  uint64_t codec_seed_ = 0;
  int64_t fusion_bytes_ = 0;
  int64_t chunk_bytes_ = 0;
  int64_t session_cycle_us_ = 500;
  int64_t store_max_bytes_ = int64_t{64} << 20;
  int64_t store_max_keys_ = 262144;
  std::map<std::string, std::string> forced_algorithms_;
};

// Parses "12", "64K", "1M", "2G" (binary multiples) into bytes; false on garbage.
bool parse_byte_size(const std::string& text, int64_t* bytes);

}  // namespace tidegate
