// Runs a tool (tidegate-run, tidegate-bench) as a child process for tests: captures stdout and
// stderr separately, lets a test wait for a line of output, send a signal, and wait for the
// exit - every wait bounded by a deadline, never a sleep.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace tidegate::testing {

struct ProcessResult {
  int exit_code = -1;  // exit code, or 128 + signal; -1 if it had to be killed at the deadline
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;  // wall time from start to exit
};

class Subprocess {
 public:
  // Starts argv with the test's environment plus `extra_env` ("NAME=value"; an entry "NAME="
  // with an empty value is passed as such) minus every name in `unset_env`.
  Subprocess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {},
             const std::vector<std::string>& unset_env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Reads output until stdout contains `needle` or the timeout passes; true when found.
  bool wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout);
  // Sends a signal to the process.
  void signal(int sig);
  // Reads all output until the process exits, or kills it (SIGKILL) at the timeout.
  ProcessResult finish(std::chrono::milliseconds timeout);

 private:
  // One poll round over both pipes and the exit; false when both pipes are closed and the
  // process has been reaped.
  bool pump(int timeout_ms);
  void reap();

  pid_t pid_ = -1;
  int pid_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::chrono::steady_clock::time_point started_;
  ProcessResult result_;
};

// Convenience: start, finish with a timeout.
ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60),
                          const std::vector<std::string>& extra_env = {},
                          const std::vector<std::string>& unset_env = {});

// Lines of `text` (without the newlines).
std::vector<std::string> split_lines(const std::string& text);

}  // namespace tidegate::testing
