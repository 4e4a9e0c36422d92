#include "tools/tidegate_run/rank_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

extern char** environ;

namespace tidegate::run {

namespace {

// Variables the launcher sets itself; inherited copies are dropped.
bool launcher_controls(const std::string& entry, const RunOptions& options) {
  static const char* const kControlled[] = {
      "TIDEGATE_RANK=",        "TIDEGATE_SIZE=",         "TIDEGATE_LOCAL_RANK=",
      "TIDEGATE_STORE_ADDR=",  "TIDEGATE_STORE_HOST=",   "TIDEGATE_SECRET=",
      "TIDEGATE_SECRET_FILE=", "TIDEGATE_RESTART_COUNT="};
  for (const char* prefix : kControlled) {
    if (entry.rfind(prefix, 0) == 0) return true;
  }
  return options.timeout_ms > 0 && entry.rfind("TIDEGATE_TIMEOUT_MS=", 0) == 0;
}

// execve needs a path: search PATH (from the rank's environment) here, in the parent, because
// after fork() in a threaded process only async-signal-safe calls are allowed.
std::string resolve_program(const std::string& program, const std::vector<std::string>& env) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& entry : env) {
    if (entry.rfind("PATH=", 0) == 0) path = entry.substr(5);
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return program;  // execve fails with ENOENT and the error names the program
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Runs in the child between fork() and execve(): async-signal-safe calls only. Reports a
// failure as an errno value on error_fd and exits 127.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, int null_fd,
                             int out_fd, int err_fd, int error_fd, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  // The launcher ignores SIGPIPE, and ignored signals survive execve: give ranks the default
  // action for it and for the signals they may be sent to stop.
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(sig, &dfl, nullptr);
  if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
    int e = errno;
    (void)!::write(error_fd, &e, sizeof e);
    ::_exit(127);
  }
  // Close everything else (the store's sockets, other ranks' pipes) but the error pipe, which
  // is close-on-exec and so tells the parent that execve succeeded by reaching EOF.
  if (error_fd > 3) ::close_range(3, static_cast<unsigned>(error_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(error_fd) + 1, ~0U, 0);
  ::execve(path, argv, envp);
  int e = errno;
  (void)!::write(error_fd, &e, sizeof e);
  ::_exit(127);
}

Status make_pipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return system_error("pipe2", errno);
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  return Status::ok();
}

}  // namespace

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::vector<std::string> rank_environment(const std::vector<std::string>& inherited,
                                          const RunOptions& options, const JobEnvironment& job,
                                          int rank, int restart) {
  std::vector<std::string> env;
  for (const std::string& entry : inherited) {
    if (!launcher_controls(entry, options)) env.push_back(entry);
  }
  env.push_back("TIDEGATE_RANK=" + std::to_string(rank));
  env.push_back("TIDEGATE_SIZE=" + std::to_string(options.ranks));
  env.push_back("TIDEGATE_LOCAL_RANK=" + std::to_string(rank));
  env.push_back("TIDEGATE_STORE_ADDR=" + job.store_address);
  env.push_back("TIDEGATE_STORE_HOST=external");
  env.push_back("TIDEGATE_SECRET_FILE=" + job.secret_path);
  if (options.timeout_ms > 0)
    env.push_back("TIDEGATE_TIMEOUT_MS=" + std::to_string(options.timeout_ms));
  if (restart > 0) env.push_back("TIDEGATE_RESTART_COUNT=" + std::to_string(restart));
  return env;
}

Status spawn_rank(int rank, const std::vector<std::string>& argv_in,
                  const std::vector<std::string>& env_in, RankProcess* process) {
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> env = env_in;
  const std::string path = resolve_program(argv.at(0), env);
  std::vector<char*> argv_c = c_strings(argv);
  std::vector<char*> env_c = c_strings(env);

  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) return system_error("open /dev/null", errno);
  UniqueFd out_read, out_write, err_read, err_write, error_read, error_write;
  TG_RETURN_IF_ERROR(make_pipe(&out_read, &out_write));
  TG_RETURN_IF_ERROR(make_pipe(&err_read, &err_write));
  TG_RETURN_IF_ERROR(make_pipe(&error_read, &error_write));

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return system_error("fork for rank " + std::to_string(rank), errno);
  if (pid == 0) {
    exec_child(path.c_str(), argv_c.data(), env_c.data(), null_fd.get(), out_write.get(),
               err_write.get(), error_write.get(), parent);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  error_write.reset();
  out_write.reset();
  err_write.reset();

  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  process->rank = rank;
  process->pid = pid;
  process->running = true;
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    ::waitpid(pid, &status, 0);  // exits immediately with 127
    process->running = false;
    process->wait_status = status;
    return system_error("rank " + std::to_string(rank) + ": cannot execute '" + path + "'",
                        child_errno);
  }
  TG_RETURN_IF_ERROR(set_nonblocking(out_read.get(), true));
  TG_RETURN_IF_ERROR(set_nonblocking(err_read.get(), true));
  process->stdout_pipe = std::move(out_read);
  process->stderr_pipe = std::move(err_read);
  return Status::ok();
}

void signal_rank(const RankProcess& process, int signal) {
  if (process.running && process.pid > 0) ::kill(-process.pid, signal);
}

int exit_code_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int sig = WTERMSIG(wait_status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(wait_status);
}

}  // namespace tidegate::run
