// The launcher's event loop: forwards the ranks' output, reaps them, and applies the job's
// failure policy - when one rank fails, the others are stopped (SIGTERM, then SIGKILL after
// a grace period) and the job exits with the failed rank's code. Signals reach the loop
// through a signalfd, so there is no async signal handler and no race with poll().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/types.h"
#include "tools/tidegate_run/line_forwarder.h"
#include "tools/tidegate_run/rank_process.h"
#include "tools/tidegate_run/run_options.h"

namespace tidegate::run {

// The signals the loop handles; main() blocks them (in every thread, so before any thread
// starts) and hands the supervisor a signalfd for them.
const std::vector<int>& supervised_signals();

class JobSupervisor {
 public:
  JobSupervisor(const RunOptions& options, int signal_fd);

  // Takes ownership of a started rank.
  void add_rank(RankProcess process);
  // Stops every rank and makes the job's exit code `exit_code` (used when starting fails).
  void fail_job(const std::string& why, int exit_code);
  // Runs until every rank has exited and its output is forwarded; returns the job's exit code.
  int supervise();

 private:
  struct Rank {
    RankProcess process;
    LineForwarder out;
    LineForwarder err;
  };

  void handle_signals();
  void reap_ranks();
  void on_rank_exit(Rank& rank);
  void stop_ranks(int signal);
  void check_deadlines();
  bool any_running() const;
  bool any_pipe_open() const;
  int poll_timeout_ms() const;
  void poll_once();

  const RunOptions& options_;
  int signal_fd_;
  std::vector<Rank> ranks_;
  bool failed_ = false;  // the job's outcome is decided: exit_code_ is final
  int exit_code_ = 0;
  int interrupted_by_ = 0;                    // first SIGINT/SIGTERM/SIGHUP received, 0 if none
  std::optional<Clock::time_point> kill_at_;  // when SIGTERMed ranks get SIGKILL
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> drain_until_;  // last chance for output after all exited
};

}  // namespace tidegate::run
