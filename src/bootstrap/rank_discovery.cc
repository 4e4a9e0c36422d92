#include "bootstrap/rank_discovery.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace tidegate {

namespace {

struct RankSource {
  const char* name;  // for messages: who set these variables
  const char* rank_var;
  const char* size_var;
  bool is_tidegate;  // read with config.raw() rather than config.launcher_variable()
};

// In order of precedence: an explicit setting beats whatever the launcher says.
constexpr RankSource kSources[] = {
    {"tidegate", "TIDEGATE_RANK", "TIDEGATE_SIZE", true},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false},
    {"PMI", "PMI_RANK", "PMI_SIZE", false},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", false},
};

std::string read_variable(const Config& config, const RankSource& source, const char* name) {
  return source.is_tidegate ? config.raw(name) : config.launcher_variable(name);
}

// A whole decimal integer that fits an int; surrounding whitespace is not accepted.
Status parse_int_variable(const char* name, const std::string& text, int* out) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  const bool digits_only = !text.empty() && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9'));
  if (!digits_only || *end != '\0' || errno != 0 || value < INT_MIN || value > INT_MAX) {
    return config_error(std::string(name) + "='" + text + "' is not an integer");
  }
  *out = static_cast<int>(value);
  return Status::ok();
}

Status read_pair(const Config& config, const RankSource& source, int* rank, int* size) {
  const std::string rank_text = read_variable(config, source, source.rank_var);
  const std::string size_text = read_variable(config, source, source.size_var);
  if (rank_text.empty() || size_text.empty()) {
    const char* missing = rank_text.empty() ? source.rank_var : source.size_var;
    const char* present = rank_text.empty() ? source.size_var : source.rank_var;
    return config_error(std::string(present) + " is set but " + missing +
                        " is not: set both, or neither to let the launcher decide");
  }
  TG_RETURN_IF_ERROR(parse_int_variable(source.rank_var, rank_text, rank));
  TG_RETURN_IF_ERROR(parse_int_variable(source.size_var, size_text, size));
  if (*size < 1) {
    return config_error(std::string(source.size_var) + "=" + size_text + " must be at least 1");
  }
  if (*rank < 0 || *rank >= *size) {
    return config_error(std::string(source.rank_var) + "=" + rank_text + " is outside [0, " +
                        source.size_var + "=" + size_text + ")");
  }
  return Status::ok();
}

}  // namespace

Status discover_rank_and_size(const Config& config, int* rank, int* size, std::string* source) {
  for (const RankSource& candidate : kSources) {
    const bool rank_set = !read_variable(config, candidate, candidate.rank_var).empty();
    const bool size_set = !read_variable(config, candidate, candidate.size_var).empty();
    if (!rank_set && !size_set) continue;
    int r = 0;
    int s = 0;
    TG_RETURN_IF_ERROR(read_pair(config, candidate, &r, &s));
    *rank = r;
    *size = s;
    *source =
        std::string(candidate.name) + " (" + candidate.rank_var + "/" + candidate.size_var + ")";
    return Status::ok();
  }
  return config_error(
      "cannot tell this process's rank: set TIDEGATE_RANK and TIDEGATE_SIZE, or "
      "start it with tidegate-run, mpirun or srun");
}

}  // namespace tidegate
