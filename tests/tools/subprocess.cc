#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace tidegate::testing {

namespace {

std::vector<std::string> child_environment(const std::vector<std::string>& extra,
                                           const std::vector<std::string>& unset) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = name_of(entry);
    bool drop = std::find(unset.begin(), unset.end(), name) != unset.end();
    for (const std::string& x : extra) drop = drop || name_of(x) == name;
    if (!drop) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv_in,
                       const std::vector<std::string>& extra_env,
                       const std::vector<std::string>& unset_env) {
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> env = child_environment(extra_env, unset_env);
  std::vector<char*> argv_c = pointers(argv);
  std::vector<char*> env_c = pointers(env);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  started_ = std::chrono::steady_clock::now();
  int rc = posix_spawnp(&pid_, argv_c[0], &actions, nullptr, argv_c.data(), env_c.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (rc != 0)
    throw std::runtime_error(std::string("posix_spawnp ") + argv[0] + ": " + std::strerror(rc));
  // Through syscall(): glibc 2.36's <sys/pidfd.h> lacks the extern "C" that C++ needs.
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pid_fd_ < 0) throw std::runtime_error(std::string("pidfd_open: ") + std::strerror(errno));
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (pid_fd_ >= 0) ::close(pid_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool Subprocess::pump(int timeout_ms) {
  // The pidfd becomes readable when the process exits, so one poll() waits for output and
  // for the exit at once.
  pollfd fds[3] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}, {pid_fd_, POLLIN, 0}};
  if (out_fd_ < 0 && err_fd_ < 0 && pid_fd_ < 0) return false;
  if (::poll(fds, 3, timeout_ms) <= 0) return true;
  int* fd_of[2] = {&out_fd_, &err_fd_};
  std::string* text_of[2] = {&result_.out, &result_.err};
  for (int i = 0; i < 2; ++i) {
    if (fds[i].revents == 0 || *fd_of[i] < 0) continue;
    char buffer[8192];
    ssize_t n = ::read(*fd_of[i], buffer, sizeof buffer);
    if (n > 0) {
      text_of[i]->append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(*fd_of[i]);
      *fd_of[i] = -1;
    }
  }
  if (fds[2].revents != 0 && pid_fd_ >= 0) reap();
  return out_fd_ >= 0 || err_fd_ >= 0 || pid_fd_ >= 0;
}

void Subprocess::reap() {
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return;
  pid_ = -1;
  ::close(pid_fd_);
  pid_fd_ = -1;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

bool Subprocess::wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (result_.out.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !pump(static_cast<int>(left.count()))) {
      return result_.out.find(needle) != std::string::npos;
    }
  }
  return true;
}

void Subprocess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

ProcessResult Subprocess::finish(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result_.timed_out = true;
      break;
    }
    if (!pump(static_cast<int>(left.count()))) break;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    result_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  return result_;
}

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::vector<std::string>& extra_env,
                          const std::vector<std::string>& unset_env) {
  Subprocess process(argv, extra_env, unset_env);
  return process.finish(timeout);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace tidegate::testing
