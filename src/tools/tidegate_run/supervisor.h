// The launcher's event loop: forwards the ranks' output, reaps them, and applies the job's
// failure policy - when one rank fails, the others are stopped (SIGTERM, then SIGKILL after
// a grace period) and the job exits with the failed rank's code; or, while the job has restarts
// left (--restarts), the failed rank alone is started again and the others go on (they meet it
// in a new communicator, as torchrun's elastic agent has them do). Signals reach the loop
// through a signalfd, so there is no async signal handler and no race with poll().
#pragma once

#include <functional>
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

  // Starts rank `rank` again for its `restart`-th time (1, 2, ...).
  using RankStarter = std::function<Status(int rank, int restart, RankProcess* process)>;

  // Takes ownership of a started rank.
  void add_rank(RankProcess process);
  // A failed rank is started again with `start`, up to `restarts` times in the whole job.
  void allow_restarts(int64_t restarts, RankStarter start);
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
  void restart_failed_ranks();
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
  int64_t restarts_left_ = 0;
  RankStarter start_rank_;
  std::vector<int> restarts_of_rank_;                     // by rank number
  std::vector<std::pair<int, std::string>> restart_due_;  // rank, how it failed
  int interrupted_by_ = 0;                    // first SIGINT/SIGTERM/SIGHUP received, 0 if none
  std::optional<Clock::time_point> kill_at_;  // when SIGTERMed ranks get SIGKILL
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> drain_until_;  // last chance for output after all exited
};

}  // namespace tidegate::run
