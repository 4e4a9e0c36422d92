#include "base/config.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace tidegate {

const std::vector<ConfigEntry>& config_table() {
  static const std::vector<ConfigEntry> table = {
      {"TIDEGATE_RANK", "",
       "This process's rank; when unset, taken from the launcher (Open MPI, PMI, Slurm)."},
      {"TIDEGATE_SIZE", "",
       "Number of ranks; when unset, taken from the launcher (Open MPI, PMI, Slurm)."},
      {"TIDEGATE_STORE_ADDR", "",
       "host:port of the rendezvous store; required for communicators created from the "
       "environment."},
      {"TIDEGATE_STORE_HOST", "rank0",
       "Who serves the store at TIDEGATE_STORE_ADDR: rank0 (rank 0 binds it) or external (a "
       "launcher such as tidegate-run does)."},
      {"TIDEGATE_STORE_MAX_BYTES", "64M",
       "Cap on what the rendezvous store that tidegate serves holds (keys, values and 64 bytes "
       "per key); a set beyond it is refused with an error."},
      {"TIDEGATE_STORE_MAX_KEYS", "262144",
       "Cap on the number of keys the rendezvous store that tidegate serves holds; a set of a new "
       "key beyond it is refused with an error."},
      {"TIDEGATE_SECRET", "",
       "Job secret that authenticates every store and data connection (HMAC-SHA256 "
       "challenge-response)."},
      {"TIDEGATE_SECRET_FILE", "",
       "File holding the job secret; must not be readable by group or others (mode 0600)."},
      {"TIDEGATE_TIMEOUT_MS", "300000",
       "Deadline in milliseconds: a collective or rendezvous that makes no progress for this long "
       "fails with a timeout on every rank."},
      {"TIDEGATE_TRANSPORT", "auto",
       "Transports to connect: auto (every built one that can run here: tcp; mpi under mpirun with "
       "MPI_THREAD_MULTIPLE; ucx; nccl with a GPU; the plan picks per op) or one transport's "
       "name."},
      {"TIDEGATE_PROBE", "on",
       "Bandwidth probe at communicator creation: on (measure, or load TIDEGATE_PROBE_CACHE) or "
       "off (plan from nominal figures, i.e. the fixed size rule)."},
      {"TIDEGATE_PROBE_BUDGET_MS", "800",
       "Upper bound in milliseconds on the time the probe spends measuring, all transports "
       "together."},
      {"TIDEGATE_PROBE_CACHE", "",
       "Profile file: when it holds a profile for the same ranks and transports the probe is "
       "skipped; after measuring, rank 0 writes it."},
      {"TIDEGATE_TUNE", "",
       "Plan overrides, rules separated by #, e.g. "
       "allreduce:0-64K:@recursive_doubling#allreduce:64K-inf:tcp:@ring (grammar in README)."},
      {"TIDEGATE_REPLAN_INTERVAL", "64",
       "Collectives between two online re-planning rounds (ranks agree on measured/predicted times "
       "and re-plan identically); 0 disables."},
      {"TIDEGATE_REPLAN_MARGIN", "0.25",
       "Re-plan when a choice's agreed measured/predicted time ratio is off from 1 by more than "
       "this fraction."},
      {"TIDEGATE_ALGO", "",
       "Force algorithms, as collective=algorithm pairs separated by commas (e.g. allreduce=ring "
       "or allreduce=native); empty lets the plan decide."},
      {"TIDEGATE_ALLREDUCE_RD_MAX_BYTES", "16K",
       "With TIDEGATE_PROBE=off: allreduce messages up to this size use recursive doubling."},
      {"TIDEGATE_ALLREDUCE_RING_MIN_BYTES", "1M",
       "With TIDEGATE_PROBE=off: allreduce messages from this size use the ring; sizes between the "
       "two thresholds use Rabenseifner halving-doubling."},
      {"TIDEGATE_SPIN_US", "100",
       "Microseconds the progress thread keeps polling the transport (yielding between polls) "
       "before it sleeps while an op waits for peers; saves a sleep and wake-up per round of small "
       "messages (ops above 256 KiB poll only while the wire's next bytes come within this "
       "window, so that polling through a slow link's gaps does not take the CPU from compute). "
       "0 sleeps at once."},
      {"TIDEGATE_CALLER_RUNS", "1",
       "1: a blocking call (tidegate_allreduce and the like) runs its op on the caller's thread "
       "when the progress thread is not busy, saving the hand-over to that thread and back (two "
       "wake-ups, most of a small op's time); 0: the progress thread runs every op."},
      {"TIDEGATE_SEED", "0",
       "Job seed of the stochastic codecs (qsgd, random-k, stochastic rounding, PowerSGD's first "
       "Q): draws are a pure function of (seed, tensor key, the key's step); every rank must use "
       "the same."},
      {"TIDEGATE_CODECS", "",
       "Default allow-list of the compressed allreduce's codec \"auto\" (when the call gives "
       "none): "
       "the lossy codecs the plan may pick per tensor, e.g. none,fp16,topk:ratio=0.01,qsgd:bits=4; "
       "empty: auto always runs dense."},
      {"TIDEGATE_OPS_IN_FLIGHT", "4",
       "Collectives the progress engine runs at once, each on its own transport channel (requests "
       "still complete in posting order); 1 runs them one at a time."},
      {"TIDEGATE_FUSION_BYTES", "auto",
       "Gradient session: dense gradients up to this size are packed into one op, up to this many "
       "bytes; auto: from the plan (where per-message latency stops dominating); off: no fusion."},
      {"TIDEGATE_CHUNK_BYTES", "auto",
       "Gradient session: dense gradients above this size are cut into pieces of it, so a "
       "high-priority gradient that becomes ready late waits for little; auto: from the plan; "
       "off: never cut."},
      {"TIDEGATE_SESSION_CYCLE_US", "500",
       "Gradient session: how long an idle scheduler waits for a newly ready gradient before it "
       "negotiates again (the other ranks' readiness comes with each negotiation)."},
      {"TIDEGATE_SEGMENT_BYTES", "1M",
       "Pipelining unit: ring steps are split into segments of at most this size so reduction "
       "overlaps transfer."},
      {"TIDEGATE_TCP_ADDR", "auto",
       "Address the TCP transport binds and advertises; auto uses the local address that reaches "
       "the store."},
      {"TIDEGATE_TCP_IFACE", "",
       "Network interface whose IPv4 address the TCP transport uses (overrides "
       "TIDEGATE_TCP_ADDR)."},
      {"TIDEGATE_TCP_STREAMS", "2",
       "TCP connections per peer; large messages are striped across them."},
      {"TIDEGATE_TCP_BUFFER_BYTES", "0",
       "SO_SNDBUF/SO_RCVBUF for data sockets; 0 keeps the kernel's autotuning."},
      {"TIDEGATE_EXIT_WATCH", "on",
       "on: transports whose library does not report a killed peer (mpi, nccl) also keep one "
       "idle TCP connection per peer, so that a rank whose process ended is named within "
       "milliseconds instead of at the deadline; off: no such connections (peers must reach each "
       "other over TCP for on)."},
      {"TIDEGATE_NATIVE_PREDICTION", "on",
       "on: a small native allreduce that the ops before it predict (one op or a cycle of ops "
       "repeated) runs as one collective with its identity check folded in, instead of an "
       "identity round and then the collective; off: every native op has its identity round "
       "(off on any rank turns it off on every rank)."},
      {"TIDEGATE_LOG_LEVEL", "warn", "Logging to stderr: error, warn, info or debug."},
  };
  return table;
}

std::string config_table_markdown() {
  std::ostringstream out;
  out << "| variable | default | meaning |\n|---|---|---|\n";
  for (const ConfigEntry& e : config_table()) {
    out << "| `" << e.env << "` | "
        << (e.default_value[0] ? std::string("`") + e.default_value + "`" : "(unset)") << " | "
        << e.meaning << " |\n";
  }
  return out.str();
}

bool parse_byte_size(const std::string& text, int64_t* bytes) {
  if (text.empty()) return false;
  size_t pos = 0;
  int64_t value = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (value > (INT64_MAX - 9) / 10) return false;
    value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  if (pos == 0) return false;
  int shift = 0;
  if (pos < text.size()) {
    switch (text[pos]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        return false;
    }
    ++pos;
    if (pos < text.size() && (text[pos] == 'B' || text[pos] == 'b' || text[pos] == 'i')) ++pos;
    if (pos < text.size() && (text[pos] == 'B' || text[pos] == 'b')) ++pos;
  }
  if (pos != text.size()) return false;
  if (shift && value > (INT64_MAX >> shift)) return false;
  *bytes = value << shift;
  return true;
}

Config::Config() {
  for (const ConfigEntry& e : config_table()) values_[e.env] = e.default_value;
  Status st = validate_and_cache();
  (void)st;  // the defaults are valid by construction (checked by a unit test)
}

Status Config::from_environment(Config* out) {
  Config config;
  for (const ConfigEntry& e : config_table()) {
    const char* value = std::getenv(e.env);
    if (value != nullptr) config.values_[e.env] = value;
  }
  for (const std::string& name : launcher_variable_names()) {
    const char* value = std::getenv(name.c_str());
    if (value != nullptr) config.launcher_values_[name] = value;
  }
  TG_RETURN_IF_ERROR(config.validate_and_cache());
  *out = std::move(config);
  return Status::ok();
}

const std::string& Config::raw(const std::string& env) const {
  static const std::string empty;
  auto it = values_.find(env);
  return it == values_.end() ? empty : it->second;
}

Status Config::set(const std::string& env, const std::string& value) {
  auto it = values_.find(env);
  if (it == values_.end()) return config_error("unknown configuration variable " + env);
  std::string previous = it->second;
  it->second = value;
  Status st = validate_and_cache();
  if (!st.is_ok()) {
    it->second = previous;
    TG_RETURN_IF_ERROR(validate_and_cache());
    return st;
  }
  return Status::ok();
}

const std::vector<std::string>& Config::launcher_variable_names() {
  static const std::vector<std::string> names = {"OMPI_COMM_WORLD_RANK",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "PMI_RANK",
                                                 "PMI_SIZE",
                                                 "PMIX_RANK",
                                                 "SLURM_PROCID",
                                                 "SLURM_NTASKS",
                                                 "SLURM_LOCALID",
                                                 "MPI_LOCALRANKID"};
  return names;
}

std::string Config::launcher_variable(const std::string& name) const {
  auto it = launcher_values_.find(name);
  return it == launcher_values_.end() ? std::string() : it->second;
}

std::string Config::forced_algorithm(const std::string& collective) const {
  auto it = forced_algorithms_.find(collective);
  return it == forced_algorithms_.end() ? std::string() : it->second;
}

namespace {

Status parse_positive_integer(const Config& c, const char* env, int64_t min, int64_t max,
                              int64_t* out) {
  const std::string& text = c.raw(env);
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    return config_error(std::string(env) + "='" + text + "' is not an integer in [" +
                        std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  *out = value;
  return Status::ok();
}

Status parse_on_off(const Config& c, const char* env, bool* out) {
  const std::string& text = c.raw(env);
  if (text != "on" && text != "off") {
    return config_error(std::string(env) + "='" + text + "' must be on or off");
  }
  *out = text == "on";
  return Status::ok();
}

Status parse_size_variable(const Config& c, const char* env, int64_t min, int64_t* out) {
  const std::string& text = c.raw(env);
  if (!parse_byte_size(text, out) || *out < min) {
    return config_error(std::string(env) + "='" + text +
                        "' is not a byte size such as 65536, 64K or 1M (minimum " +
                        std::to_string(min) + ")");
  }
  return Status::ok();
}

// "auto" -> 0, "off" -> -1, otherwise a byte size of at least 64 bytes.
Status parse_session_bytes(const Config& c, const char* env, int64_t* out) {
  const std::string& text = c.raw(env);
  if (text == "auto") {
    *out = 0;
    return Status::ok();
  }
  if (text == "off") {
    *out = -1;
    return Status::ok();
  }
  return parse_size_variable(c, env, 64, out);
}

}  // namespace

Status Config::validate_and_cache() {
  TG_RETURN_IF_ERROR(
      parse_positive_integer(*this, "TIDEGATE_TIMEOUT_MS", 1, int64_t{1} << 40, &timeout_ms_));
  int64_t streams = 0;
  TG_RETURN_IF_ERROR(parse_positive_integer(*this, "TIDEGATE_TCP_STREAMS", 1, 16, &streams));
  tcp_streams_ = static_cast<int>(streams);
  TG_RETURN_IF_ERROR(
      parse_size_variable(*this, "TIDEGATE_TCP_BUFFER_BYTES", 0, &tcp_buffer_bytes_));
  TG_RETURN_IF_ERROR(parse_size_variable(*this, "TIDEGATE_SEGMENT_BYTES", 4096, &segment_bytes_));
  TG_RETURN_IF_ERROR(parse_positive_integer(*this, "TIDEGATE_SPIN_US", 0, 100000, &spin_us_));
  {
    int64_t caller_runs = 1;
    TG_RETURN_IF_ERROR(parse_positive_integer(*this, "TIDEGATE_CALLER_RUNS", 0, 1, &caller_runs));
    caller_runs_ = caller_runs == 1;
  }
  TG_RETURN_IF_ERROR(
      parse_positive_integer(*this, "TIDEGATE_OPS_IN_FLIGHT", 1, 64, &ops_in_flight_));
  {
    const std::string& text = raw("TIDEGATE_SEED");
    char* end = nullptr;
    errno = 0;
    const unsigned long long seed = std::strtoull(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
      return config_error("TIDEGATE_SEED='" + text + "' is not an unsigned 64-bit integer");
    }
    codec_seed_ = seed;
  }
  TG_RETURN_IF_ERROR(
      parse_size_variable(*this, "TIDEGATE_ALLREDUCE_RD_MAX_BYTES", 0, &rd_max_bytes_));
  TG_RETURN_IF_ERROR(
      parse_size_variable(*this, "TIDEGATE_ALLREDUCE_RING_MIN_BYTES", 0, &ring_min_bytes_));

  TG_RETURN_IF_ERROR(parse_on_off(*this, "TIDEGATE_EXIT_WATCH", &exit_watch_));
  TG_RETURN_IF_ERROR(parse_on_off(*this, "TIDEGATE_NATIVE_PREDICTION", &native_prediction_));
  TG_RETURN_IF_ERROR(parse_on_off(*this, "TIDEGATE_PROBE", &probe_enabled_));
  TG_RETURN_IF_ERROR(
      parse_positive_integer(*this, "TIDEGATE_PROBE_BUDGET_MS", 10, 600000, &probe_budget_ms_));
  TG_RETURN_IF_ERROR(parse_positive_integer(*this, "TIDEGATE_REPLAN_INTERVAL", 0, int64_t{1} << 40,
                                            &replan_interval_));
  {
    const std::string& text = raw("TIDEGATE_REPLAN_MARGIN");
    char* end = nullptr;
    double margin = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(margin > 0.0 && margin <= 100.0)) {
      return config_error("TIDEGATE_REPLAN_MARGIN='" + text +
                          "' is not a fraction in (0, 100], e.g. 0.25");
    }
    replan_margin_ = margin;
  }

  const std::string& level = raw("TIDEGATE_LOG_LEVEL");
  if (level == "error")
    log_level_ = 0;
  else if (level == "warn")
    log_level_ = 1;
  else if (level == "info")
    log_level_ = 2;
  else if (level == "debug")
    log_level_ = 3;
  else
    return config_error("TIDEGATE_LOG_LEVEL='" + level + "' must be error, warn, info or debug");

  TG_RETURN_IF_ERROR(
      parse_size_variable(*this, "TIDEGATE_STORE_MAX_BYTES", 1 << 16, &store_max_bytes_));
  TG_RETURN_IF_ERROR(parse_positive_integer(*this, "TIDEGATE_STORE_MAX_KEYS", 16, int64_t{1} << 32,
                                            &store_max_keys_));
  const std::string& host = raw("TIDEGATE_STORE_HOST");
  if (host != "rank0" && host != "external") {
    return config_error("TIDEGATE_STORE_HOST='" + host + "' must be rank0 or external");
  }

  TG_RETURN_IF_ERROR(parse_session_bytes(*this, "TIDEGATE_FUSION_BYTES", &fusion_bytes_));
  TG_RETURN_IF_ERROR(parse_session_bytes(*this, "TIDEGATE_CHUNK_BYTES", &chunk_bytes_));
  TG_RETURN_IF_ERROR(
      parse_positive_integer(*this, "TIDEGATE_SESSION_CYCLE_US", 10, 10000000, &session_cycle_us_));

  forced_algorithms_.clear();
  std::stringstream pairs(raw("TIDEGATE_ALGO"));
  std::string pair;
  while (std::getline(pairs, pair, ',')) {
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      return config_error("TIDEGATE_ALGO entry '" + pair +
                          "' is not collective=algorithm (e.g. allreduce=ring)");
    }
    forced_algorithms_[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return Status::ok();
}

}  // namespace tidegate
