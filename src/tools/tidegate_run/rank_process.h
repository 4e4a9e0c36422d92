// One rank of a local job: its command line and environment, the child process, and the read
// ends of the pipes that carry its stdout and stderr back to the launcher.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/socket_util.h"
#include "base/status.h"
#include "tools/tidegate_run/run_options.h"

namespace tidegate::run {

// What the launcher hands every rank besides its own rank number.
struct JobEnvironment {
  std::string store_address;  // "host:port" of the launcher's store
  std::string secret_path;    // the 0600 secret file
};

// The environment of rank `rank`: the launcher's own environment minus every variable the
// launcher controls (a stray TIDEGATE_SECRET would otherwise override the job's secret file),
// plus TIDEGATE_RANK/SIZE/LOCAL_RANK, the store address and the secret file, and for a rank
// started again after it failed (restart >= 1), TIDEGATE_RESTART_COUNT=restart.
std::vector<std::string> rank_environment(const std::vector<std::string>& inherited,
                                          const RunOptions& options, const JobEnvironment& job,
                                          int rank, int restart = 0);

// The launcher's environment as "NAME=value" strings.
std::vector<std::string> current_environment();

struct RankProcess {
  int rank = -1;
  pid_t pid = -1;  // also the process group id: each rank leads its own group
  bool running = false;
  int wait_status = 0;   // from waitpid, valid once !running
  UniqueFd stdout_pipe;  // read ends, non-blocking
  UniqueFd stderr_pipe;
};

// Starts `argv` with `env` as a new process group leader, stdin from /dev/null, stdout and
// stderr into fresh pipes. The child gets SIGKILL if the launcher dies (PR_SET_PDEATHSIG), so
// a killed launcher leaves no orphaned ranks. SYSTEM error naming the program when it cannot
// be found or executed.
Status spawn_rank(int rank, const std::vector<std::string>& argv,
                  const std::vector<std::string>& env, RankProcess* process);

// Sends `signal` to the rank's whole process group (a shell's children included).
void signal_rank(const RankProcess& process, int signal);

// Exit code the launcher reports for a wait status: the code, or 128 + signal number.
int exit_code_of(int wait_status);
// "exited with code 3" / "was killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

}  // namespace tidegate::run
