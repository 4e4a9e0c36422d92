// tidegate-run: starts N local ranks of a program as one tidegate job.
//
// The launcher generates the job secret, writes it to a 0600 file, hosts the authenticated
// rendezvous store in-process (TIDEGATE_STORE_HOST=external tells the ranks that nobody among
// them has to), starts the ranks with their environment and supervises them (supervisor.h).
#include <sys/signalfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <memory>

#include "base/config.h"
#include "base/log.h"
#include "bootstrap/tcp_store.h"
#include "tools/tidegate_run/rank_process.h"
#include "tools/tidegate_run/run_options.h"
#include "tools/tidegate_run/secret_file.h"
#include "tools/tidegate_run/supervisor.h"

namespace tidegate::run {
namespace {

// Blocks the supervised signals before any thread exists (the store's thread inherits the
// mask, so only the signalfd ever sees them) and ignores SIGPIPE (a closed stdout must not
// kill the launcher while ranks run).
Status make_signal_fd(UniqueFd* fd) {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : supervised_signals()) sigaddset(&mask, sig);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return system_error("sigprocmask", errno);
  // A launcher started in the background by a shell inherits SIGINT and SIGQUIT ignored; an
  // ignored signal never becomes pending, so the signalfd would not see it (and the ranks
  // would inherit the ignoring, which a shell rank cannot even trap). They are blocked now,
  // so restoring the default action is safe.
  for (int sig : supervised_signals()) std::signal(sig, SIG_DFL);
  std::signal(SIGPIPE, SIG_IGN);
  fd->reset(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd->valid()) return system_error("signalfd", errno);
  return Status::ok();
}

Status start_rank(const RunOptions& options, const JobEnvironment& job,
                  const std::vector<std::string>& inherited, int rank, int restart,
                  RankProcess* process) {
  std::vector<std::string> argv = expand_wrap(options.wrap, rank);
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  return spawn_rank(rank, argv, rank_environment(inherited, options, job, rank, restart), process);
}

void start_ranks(const RunOptions& options, const JobEnvironment& job, JobSupervisor* supervisor) {
  const std::vector<std::string> inherited = current_environment();
  supervisor->allow_restarts(
      options.restarts, [&options, job, inherited](int rank, int restart, RankProcess* process) {
        return start_rank(options, job, inherited, rank, restart, process);
      });
  for (int rank = 0; rank < options.ranks; ++rank) {
    RankProcess process;
    Status st = start_rank(options, job, inherited, rank, 0, &process);
    if (!st.is_ok()) {
      // 127 is the shell's "command not found / not executable" convention.
      supervisor->fail_job("cannot start rank " + std::to_string(rank) + ": " + st.to_string(),
                           127);
      return;
    }
    supervisor->add_rank(std::move(process));
  }
}

int run_job(const RunOptions& options) {
  Config config;
  Status st = Config::from_environment(&config);
  if (st.is_ok()) set_log_level(config.log_level());

  UniqueFd signal_fd;
  SecretFile secret_file;
  Secret secret;
  std::unique_ptr<TcpStoreServer> store;
  st = make_signal_fd(&signal_fd);
  if (st.is_ok()) st = Secret::random(&secret);
  if (st.is_ok()) st = secret_file.create(secret);
  if (st.is_ok()) st = TcpStoreServer::start(options.host, 0, secret, config, &store);
  if (!st.is_ok()) {
    std::fprintf(stderr, "tidegate-run: cannot set the job up: %s\n", st.to_string().c_str());
    return 1;
  }

  JobSupervisor supervisor(options, signal_fd.get());
  start_ranks(options, JobEnvironment{store->address(), secret_file.path()}, &supervisor);
  const int code = supervisor.supervise();
  store->stop();
  secret_file.remove();
  return code;
}

}  // namespace
}  // namespace tidegate::run

int main(int argc, char** argv) {
  tidegate::run::RunOptions options;
  bool help = false;
  tidegate::Status st = tidegate::run::parse_run_options(argc, argv, &options, &help);
  if (help) {
    std::fputs(tidegate::run::run_usage(), stdout);
    return 0;
  }
  if (!st.is_ok()) {
    std::fprintf(stderr, "tidegate-run: %s\n\n%s", st.message().c_str(),
                 tidegate::run::run_usage());
    return 2;
  }
  return tidegate::run::run_job(options);
}
