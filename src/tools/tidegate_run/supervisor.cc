#include "tools/tidegate_run/supervisor.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace tidegate::run {

namespace {

// Output still arriving after every rank exited comes from processes the ranks left behind
// (a backgrounded child holding the pipe); it gets this long before the launcher returns.
constexpr Milliseconds kDrainAfterExit(2000);
// poll() wakes at least this often, so a lost wakeup can only delay, never hang, the loop.
constexpr int kMaxPollMs = 500;

void say(const std::string& message) {
  std::string line = "tidegate-run: " + message + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

int ms_until(Clock::time_point at) {
  auto left = std::chrono::duration_cast<Milliseconds>(at - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, kMaxPollMs));
}

}  // namespace

const std::vector<int>& supervised_signals() {
  static const std::vector<int> signals = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  return signals;
}

JobSupervisor::JobSupervisor(const RunOptions& options, int signal_fd)
    : options_(options), signal_fd_(signal_fd) {
  if (options.job_timeout_ms > 0) {
    job_deadline_ = Clock::now() + Milliseconds(options.job_timeout_ms);
  }
}

void JobSupervisor::add_rank(RankProcess process) {
  const std::string prefix =
      options_.prefix_output ? "[" + std::to_string(process.rank) + "] " : "";
  ranks_.push_back(Rank{std::move(process), LineForwarder(STDOUT_FILENO, prefix),
                        LineForwarder(STDERR_FILENO, prefix)});
}

void JobSupervisor::allow_restarts(int64_t restarts, RankStarter start) {
  restarts_left_ = restarts;
  start_rank_ = std::move(start);
}

void JobSupervisor::fail_job(const std::string& why, int exit_code) {
  say(why);
  if (!failed_) {
    failed_ = true;
    exit_code_ = exit_code;
  }
  stop_ranks(SIGTERM);
}

void JobSupervisor::stop_ranks(int signal) {
  for (Rank& rank : ranks_) signal_rank(rank.process, signal);
  if (signal == SIGKILL) {
    kill_at_.reset();
  } else if (!kill_at_) {
    kill_at_ = Clock::now() + Milliseconds(options_.grace_ms);
  }
}

void JobSupervisor::handle_signals() {
  signalfd_siginfo info{};
  while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reap_ranks() runs after every wakeup anyway
    if (interrupted_by_ != 0) {
      say("second interrupt: killing every rank");
      stop_ranks(SIGKILL);
      continue;
    }
    interrupted_by_ = sig;
    say(std::string("got ") + strsignal(sig) + ": forwarding it to every rank");
    stop_ranks(sig);
  }
}

void JobSupervisor::reap_ranks() {
  for (Rank& rank : ranks_) {
    if (!rank.process.running) continue;
    int status = 0;
    pid_t pid = ::waitpid(rank.process.pid, &status, WNOHANG);
    if (pid == rank.process.pid) {
      rank.process.running = false;
      rank.process.wait_status = status;
      on_rank_exit(rank);
    }
  }
  restart_failed_ranks();
  if (!any_running() && !drain_until_) drain_until_ = Clock::now() + kDrainAfterExit;
}

void JobSupervisor::on_rank_exit(Rank& rank) {
  const int code = exit_code_of(rank.process.wait_status);
  if (code == 0 || failed_) return;  // success, or a rank we (or the first failure) stopped
  const std::string what = "rank " + std::to_string(rank.process.rank) + " " +
                           describe_wait_status(rank.process.wait_status);
  if (interrupted_by_ == 0 && restarts_left_ > 0 && start_rank_) {
    --restarts_left_;
    restart_due_.emplace_back(rank.process.rank, what);
    return;
  }
  failed_ = true;
  exit_code_ = code;
  if (interrupted_by_ != 0) return;  // the user asked for it; no need to explain
  say(what + "; stopping the other ranks");
  stop_ranks(SIGTERM);
}

// Outside reap_ranks' loop over ranks_, which add_rank would invalidate. The failed process's
// entry stays (its pipes may still hold output); the new process is a new entry.
void JobSupervisor::restart_failed_ranks() {
  std::vector<std::pair<int, std::string>> due = std::move(restart_due_);
  restart_due_.clear();
  for (auto& [rank, what] : due) {
    if (static_cast<size_t>(rank) >= restarts_of_rank_.size()) {
      restarts_of_rank_.resize(static_cast<size_t>(rank) + 1, 0);
    }
    const int restart = ++restarts_of_rank_[static_cast<size_t>(rank)];
    say(what + "; starting it again (restart " + std::to_string(restart) + " of this rank, " +
        std::to_string(restarts_left_) + " left to the job)");
    RankProcess process;
    Status st = start_rank_(rank, restart, &process);
    if (!st.is_ok()) {
      fail_job("cannot start rank " + std::to_string(rank) + " again: " + st.to_string(), 127);
      return;
    }
    add_rank(std::move(process));
  }
}

void JobSupervisor::check_deadlines() {
  const auto now = Clock::now();
  if (kill_at_ && now >= *kill_at_ && any_running()) {
    say("ranks still running " + std::to_string(options_.grace_ms) +
        " ms after being told to stop: sending SIGKILL");
    stop_ranks(SIGKILL);
  }
  if (job_deadline_ && now >= *job_deadline_) {
    job_deadline_.reset();
    if (any_running()) {
      fail_job("job ran past --job-timeout-ms=" + std::to_string(options_.job_timeout_ms) +
                   "; stopping every rank",
               124);
    }
  }
}

bool JobSupervisor::any_running() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.process.running; });
}

bool JobSupervisor::any_pipe_open() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
    return r.process.stdout_pipe.valid() || r.process.stderr_pipe.valid();
  });
}

int JobSupervisor::poll_timeout_ms() const {
  int timeout = kMaxPollMs;
  if (kill_at_) timeout = std::min(timeout, ms_until(*kill_at_));
  if (job_deadline_) timeout = std::min(timeout, ms_until(*job_deadline_));
  if (drain_until_) timeout = std::min(timeout, ms_until(*drain_until_));
  return timeout;
}

void JobSupervisor::poll_once() {
  std::vector<pollfd> fds;
  std::vector<std::pair<UniqueFd*, LineForwarder*>> streams;
  fds.push_back(pollfd{signal_fd_, POLLIN, 0});
  for (Rank& rank : ranks_) {
    for (auto [pipe, forwarder] : {std::pair{&rank.process.stdout_pipe, &rank.out},
                                   std::pair{&rank.process.stderr_pipe, &rank.err}}) {
      if (!pipe->valid()) continue;
      fds.push_back(pollfd{pipe->get(), POLLIN, 0});
      streams.emplace_back(pipe, forwarder);
    }
  }
  int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (ready < 0 && errno != EINTR) {
    fail_job(std::string("poll failed: ") + std::strerror(errno), 1);
    stop_ranks(SIGKILL);
    return;
  }
  if (ready <= 0) return;
  if (fds[0].revents != 0) handle_signals();
  for (size_t i = 0; i < streams.size(); ++i) {
    if (fds[i + 1].revents == 0) continue;
    auto [pipe, forwarder] = streams[i];
    if (!drain_pipe(pipe->get(), forwarder)) {
      forwarder->finish();
      pipe->reset();
    }
  }
}

int JobSupervisor::supervise() {
  for (;;) {
    reap_ranks();
    check_deadlines();
    if (!any_running()) {
      if (!any_pipe_open()) break;
      if (drain_until_ && Clock::now() >= *drain_until_) {
        say("output pipes still open after every rank exited (left-over child processes?); "
            "not waiting for them");
        break;
      }
    }
    poll_once();
  }
  for (Rank& rank : ranks_) {
    rank.out.finish();
    rank.err.finish();
  }
  if (!failed_ && interrupted_by_ != 0) return 128 + interrupted_by_;
  return exit_code_;
}

}  // namespace tidegate::run
