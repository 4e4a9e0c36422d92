#include "tools/tidegate_run/run_options.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace tidegate::run {

namespace {

Status parse_integer(const std::string& flag, const std::string& text, int64_t min, int64_t max,
                     int64_t* out) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    return config_error(flag + " '" + text + "' is not an integer in [" + std::to_string(min) +
                        ", " + std::to_string(max) + "]");
  }
  *out = value;
  return Status::ok();
}

// Reads the value of a flag that takes one ("-n 4"); advances *i past it.
Status flag_value(int argc, char** argv, int* i, std::string* value) {
  if (*i + 1 >= argc) return config_error(std::string(argv[*i]) + " needs a value");
  *value = argv[++*i];
  return Status::ok();
}

}  // namespace

const char* run_usage() {
  return "usage: tidegate-run -n N [options] -- program [args...]\n"
         "\n"
         "Starts N local ranks of `program` with the environment tidegate reads (TIDEGATE_RANK,\n"
         "TIDEGATE_SIZE, TIDEGATE_LOCAL_RANK, TIDEGATE_STORE_ADDR, TIDEGATE_SECRET_FILE), hosts\n"
         "the authenticated rendezvous store, prefixes each output line with \"[rank] \", and "
         "when\n"
         "one rank fails stops the others and exits with that rank's code (128+signal).\n"
         "\n"
         "options:\n"
         "  -n N                 number of ranks (required)\n"
         "  --host ADDR          address the store binds and ranks connect to (127.0.0.1)\n"
         "  --timeout-ms T       export TIDEGATE_TIMEOUT_MS=T to the ranks\n"
         "  --wrap 'CMD {rank}'  run each rank as CMD program args, {rank} replaced\n"
         "                       (e.g. --wrap 'ip netns exec tgc-r{rank}'); split on blanks\n"
         "  --no-prefix          forward output without \"[rank] \" prefixes\n"
         "  --grace-ms G         after SIGTERM, wait G ms before SIGKILL (3000)\n"
         "  --job-timeout-ms J   stop the whole job after J ms and exit 124 (0 = no limit)\n"
         "  --restarts R         start a rank that fails again, in the job, up to R times in\n"
         "                       all, instead of stopping the others; the new process gets\n"
         "                       TIDEGATE_RESTART_COUNT (its rank's restarts so far) and the\n"
         "                       survivors rebuild their communicator with it (0)\n"
         "  -h, --help           this text\n";
}

Status parse_run_options(int argc, char** argv, RunOptions* options, bool* help) {
  RunOptions parsed;
  *help = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    int64_t number = 0;
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "-h" || arg == "--help") {
      *help = true;
      return Status::ok();
    } else if (arg == "-n" || arg == "--np") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &value));
      TG_RETURN_IF_ERROR(parse_integer(arg, value, 1, 4096, &number));
      parsed.ranks = static_cast<int>(number);
    } else if (arg == "--host") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &parsed.host));
    } else if (arg == "--timeout-ms") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &value));
      TG_RETURN_IF_ERROR(parse_integer(arg, value, 1, int64_t{1} << 40, &parsed.timeout_ms));
    } else if (arg == "--wrap") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &parsed.wrap));
    } else if (arg == "--no-prefix") {
      parsed.prefix_output = false;
    } else if (arg == "--grace-ms") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &value));
      TG_RETURN_IF_ERROR(parse_integer(arg, value, 0, 600000, &parsed.grace_ms));
    } else if (arg == "--job-timeout-ms") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &value));
      TG_RETURN_IF_ERROR(parse_integer(arg, value, 0, int64_t{1} << 40, &parsed.job_timeout_ms));
    } else if (arg == "--restarts") {
      TG_RETURN_IF_ERROR(flag_value(argc, argv, &i, &value));
      TG_RETURN_IF_ERROR(parse_integer(arg, value, 0, 1000000, &parsed.restarts));
    } else if (!arg.empty() && arg[0] == '-') {
      return config_error("unknown option '" + arg + "' (put the program after --)");
    } else {
      break;  // first word of the program: everything from here is its command line
    }
  }
  for (; i < argc; ++i) parsed.command.emplace_back(argv[i]);
  if (parsed.ranks < 1) return config_error("-n N (the number of ranks) is required");
  if (parsed.command.empty())
    return config_error("no program given (tidegate-run -n N -- program)");
  *options = std::move(parsed);
  return Status::ok();
}

std::vector<std::string> expand_wrap(const std::string& wrap, int rank) {
  std::string text = wrap;
  const std::string placeholder = "{rank}";
  const std::string value = std::to_string(rank);
  for (size_t pos = text.find(placeholder); pos != std::string::npos;
       pos = text.find(placeholder, pos + value.size())) {
    text.replace(pos, placeholder.size(), value);
  }
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace tidegate::run
