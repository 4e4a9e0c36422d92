// Command line of tidegate-run. Parsing is separate from running so that the rules (what is a
// launcher flag, where the program's own arguments start) are easy to read and to test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate::run {

struct RunOptions {
  int ranks = 0;                     // -n: number of ranks to start (required, >= 1)
  std::string host = "127.0.0.1";    // --host: address the store binds and children connect to
  int64_t timeout_ms = -1;           // --timeout-ms: exported as TIDEGATE_TIMEOUT_MS; -1 = inherit
  std::string wrap;                  // --wrap: command prefix with {rank} placeholders
  bool prefix_output = true;         // --no-prefix turns the "[rank] " prefixes off
  int64_t grace_ms = 3000;           // --grace-ms: SIGTERM -> SIGKILL delay when stopping ranks
  int64_t job_timeout_ms = 0;        // --job-timeout-ms: stop the whole job after this; 0 = never
  int64_t restarts = 0;              // --restarts: failed ranks started again, at most this often
  std::vector<std::string> command;  // the program and its arguments (after "--")
};

// Parses argv. Sets *help (and returns OK) for -h/--help. CONFIG error with a one-line
// explanation for anything malformed.
Status parse_run_options(int argc, char** argv, RunOptions* options, bool* help);

// The usage text printed by --help and after a command-line error.
const char* run_usage();

// The wrap prefix for one rank: {rank} replaced, then split on blanks into argv words.
// (No shell quoting: the prefix is a plain command such as "ip netns exec tgc-r{rank}".)
std::vector<std::string> expand_wrap(const std::string& wrap, int rank);

}  // namespace tidegate::run
