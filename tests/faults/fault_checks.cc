#include "fault_checks.h"

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace tidegate::faults {

namespace {

// How late after the deadline a failure may be reported: the deadline check's granularity, the
// first failing rank's abort reaching the others, and a loaded machine (2 cores running other
// tests and builds; 0.55 s late was seen under ctest -j2 with a 1 s allowance).
constexpr int64_t kDeadlineSlackMs = 3000;

int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t ms_since(int64_t ns) { return (realtime_ns() - ns) / 1'000'000; }

struct Stamp {
  pid_t pid = 0;
  int64_t ns = 0;
};

bool read_stamp(const std::string& path, Stamp* stamp) {
  std::ifstream in(path);
  long long pid = 0, ns = 0;
  if (!(in >> pid >> ns)) return false;
  stamp->pid = static_cast<pid_t>(pid);
  stamp->ns = ns;
  return true;
}

// Records the moment of the fault (the survivors measure their detection time from it), then
// kills or stops this whole process. Returns only after a SIGSTOP, once continued.
void fault_now(const FaultOptions& o) {
  {
    std::ofstream out(o.stamp + ".tmp");
    out << ::getpid() << " " << realtime_ns() << "\n";
  }
  std::rename((o.stamp + ".tmp").c_str(), o.stamp.c_str());
  ::raise(o.signal == "stop" ? SIGSTOP : SIGKILL);
}

// The same from a helper thread, `delay_ms` from now (the main thread is inside tidegate).
void fault_later(const FaultOptions& o, int64_t delay_ms) {
  std::thread([o, delay_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    fault_now(o);
  }).detach();
}

int verdict(int rank, bool ok, const std::string& text, int exit_if_ok) {
  std::printf("fault-check: rank %d: %s: %s\n", rank, ok ? "OK" : "BAD", text.c_str());
  std::fflush(stdout);
  return ok ? exit_if_ok : 1;
}

std::string describe(tidegate_status_t st, const std::string& message) {
  return std::string(tidegate_status_string(st)) + ": " + message;
}

tidegate_status_t allreduce(tidegate_comm_t comm, std::vector<float>* data,
                            tidegate_reduce_op_t op = TIDEGATE_SUM) {
  tidegate_tensor_t t =
      tidegate_host_tensor(data->data(), static_cast<int64_t>(data->size()), TIDEGATE_FLOAT32);
  return tidegate_allreduce(comm, &t, &t, op);
}

// A survivor's failure: it must name the victim and come within `bound_ms` of the fault.
int judge_survivor(const FaultOptions& o, int rank, tidegate_status_t st,
                   const std::string& message, int64_t bound_ms) {
  if (st == TIDEGATE_OK) return verdict(rank, false, "no failure was reported", 0);
  Stamp stamp;
  if (!read_stamp(o.stamp, &stamp)) {
    return verdict(rank, false, "failed before the fault: " + describe(st, message), 0);
  }
  const int64_t after_ms = ms_since(stamp.ns);
  const std::string victim = "rank " + std::to_string(o.victim);
  const bool named = message.find(victim) != std::string::npos;
  const bool in_time = after_ms <= bound_ms;
  return verdict(rank, named && in_time,
                 std::to_string(after_ms) + " ms after the fault (bound " +
                     std::to_string(bound_ms) + " ms), " + (named ? "names " : "does not name ") +
                     victim + ": " + describe(st, message),
                 kExitFailedAsExpected);
}

// Runs collectives until one fails (the fault) or `limit_ms` passed.
tidegate_status_t run_until_failure(tidegate_comm_t comm, size_t floats, int64_t limit_ms,
                                    std::string* message) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  std::vector<float> data(floats, 1.0f);
  while (std::chrono::steady_clock::now() < until) {
    const tidegate_status_t st = allreduce(comm, &data);
    if (st != TIDEGATE_OK) {
      *message = tidegate_last_error();
      return st;
    }
  }
  *message = "no failure within " + std::to_string(limit_ms) + " ms";
  return TIDEGATE_OK;
}

// A stopped victim would hold the job open: the first survivor ends it once judged (a launcher
// that waits for every process, like mpirun, would otherwise wait forever).
void end_stopped_victim(const FaultOptions& o, int rank) {
  Stamp stamp;
  if (o.signal == "stop" && rank == (o.victim == 0 ? 1 : 0) && read_stamp(o.stamp, &stamp)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(stamp.pid, SIGKILL);
  }
}

size_t floats_for(const FaultOptions& o) {
  return o.phase == "mid" ? (size_t{16} << 20) / 4 : 4096;
}

int run_fault(const FaultOptions& o, Launcher& l) {
  const bool victim = l.rank == o.victim;
  // A killed rank that had connected is named through its lost connections: well before the
  // deadline (about 0.7 s on an idle machine; half the deadline allows a loaded one). Otherwise
  // the deadline names it, within kDeadlineSlackMs of it.
  const int64_t bound_ms = o.signal == "kill" && o.phase != "creation"
                               ? o.timeout_ms / 2
                               : o.timeout_ms + kDeadlineSlackMs;
  if (victim && o.phase == "creation") {
    // Once every rank has started (the launcher stops them all when one dies first), while
    // the others are creating the communicator and wait for this one.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    fault_now(o);
  }
  if (victim && o.phase == "probe") fault_later(o, 600);
  tidegate_comm_t comm = nullptr;
  if (const tidegate_status_t st = l.create(&comm); st != TIDEGATE_OK) {
    if (victim) return verdict(l.rank, false, "the victim's creation failed", 0);
    const int code = judge_survivor(o, l.rank, st, tidegate_last_error(), bound_ms);
    end_stopped_victim(o, l.rank);
    return code;
  }
  std::string message;
  tidegate_status_t st = TIDEGATE_OK;
  std::vector<float> first(4096, 1.0f);
  if (o.phase == "between") {
    st = allreduce(comm, &first);  // every rank, the victim too
    if (st != TIDEGATE_OK) {
      return verdict(l.rank, false, "the first collective failed: " + describe(st, ""), 0);
    }
    if (victim) fault_now(o);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (victim && o.phase == "mid") fault_later(o, 300);
  st = run_until_failure(comm, floats_for(o), o.timeout_ms + 10'000, &message);
  if (victim) {
    // Only a stopped victim that was continued gets here; it is not judged.
    tidegate_comm_destroy(comm);
    return 1;
  }
  const int code = judge_survivor(o, l.rank, st, message, bound_ms);
  tidegate_comm_destroy(comm);
  end_stopped_victim(o, l.rank);
  return code;
}

// Each rank says it is running, with SIGTERM ignored (a file beside the stamp).
void note_ready(const FaultOptions& o, int rank) {
  if (o.stamp.empty()) return;
  std::ofstream(o.stamp + ".ready." + std::to_string(rank)) << "ready\n";
}

// The victim of a creation failure fails within milliseconds, and the launcher then stops the
// others (SIGTERM): one that had not yet started to ignore it would die without its verdict
// (seen under load). So the victim waits, up to 10 s, until every other rank said it is ready.
void wait_for_the_others(const FaultOptions& o, const Launcher& l) {
  if (o.stamp.empty()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int rank = 0; rank < l.size; ++rank) {
    if (rank == l.rank) continue;
    const std::string path = o.stamp + ".ready." + std::to_string(rank);
    while (::access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// Creation fails for a reason of the victim's; every rank must report the real cause within
// the deadline, not "no transport could start".
int run_creation_failure(const FaultOptions& o, Launcher& l) {
  const bool victim = l.rank == o.victim;
  if (victim) wait_for_the_others(o, l);
  if (victim && o.scenario == "creation-missing") {
    return verdict(l.rank, true, "left without creating the communicator", 0);
  }
  if (victim && o.scenario == "creation-wrong-secret") setenv("TIDEGATE_SECRET", "wrong", 1);
  if (victim && o.scenario == "creation-unreachable") setenv("TIDEGATE_TCP_ADDR", "192.0.2.1", 1);
  const auto start = std::chrono::steady_clock::now();
  tidegate_comm_t comm = nullptr;
  const tidegate_status_t st = l.create(&comm);
  const std::string message = tidegate_last_error();
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  if (st == TIDEGATE_OK) {
    tidegate_comm_destroy(comm);
    return verdict(l.rank, false, "creation succeeded", 0);
  }
  const bool hidden = message.find("no transport could start") != std::string::npos;
  const bool in_time = ms <= o.timeout_ms + kDeadlineSlackMs;
  std::string cause;
  if (victim) {
    cause = o.scenario == "creation-wrong-secret" ? "secret" : "192.0.2.1";
  } else {
    cause = "rank " + std::to_string(o.victim);
  }
  const bool named = message.find(cause) != std::string::npos;
  return verdict(l.rank, !hidden && in_time && named,
                 std::to_string(ms) + " ms, " + (named ? "names '" : "does not name '") + cause +
                     "': " + describe(st, message),
                 kExitFailedAsExpected);
}

// The victim stops itself inside a collective; the survivors time out and abort; rank 0 then
// continues it. The victim must learn that its peers aborted, not report a timeout of its own.
int run_stop_resume(FaultOptions o, Launcher& l) {
  o.signal = "stop";
  const bool victim = l.rank == o.victim;
  tidegate_comm_t comm = nullptr;
  if (const tidegate_status_t st = l.create(&comm); st != TIDEGATE_OK) {
    return verdict(l.rank, false, "creation failed: " + describe(st, tidegate_last_error()), 0);
  }
  if (victim) fault_later(o, 200);
  std::string message;
  const tidegate_status_t st =
      run_until_failure(comm, (size_t{16} << 20) / 4, o.timeout_ms + 10'000, &message);
  int code = 0;
  if (victim) {
    const bool aborted =
        st == TIDEGATE_ERR_ABORTED && message.find("did not run") != std::string::npos;
    code = verdict(l.rank, aborted, "after being continued: " + describe(st, message),
                   kExitFailedAsExpected);
  } else {
    code = verdict(l.rank, st != TIDEGATE_OK, describe(st, message), kExitFailedAsExpected);
    Stamp stamp;
    if (l.rank == 0 && read_stamp(o.stamp, &stamp)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      ::kill(stamp.pid, SIGCONT);
    }
  }
  tidegate_comm_destroy(comm);
  return code;
}

// Abort and rebuild: the victim is killed between steps of a small training loop; the
// survivors destroy the failed communicator, create one over themselves only (new ranks, in
// the same processes) and go on from their last parameters, which must stay bitwise identical
// on every survivor.
int run_rebuild(FaultOptions o, Launcher& l) {
  o.signal = "kill";
  const bool victim = l.rank == o.victim;
  tidegate_comm_t comm = nullptr;
  if (const tidegate_status_t st = l.create(&comm); st != TIDEGATE_OK) {
    return verdict(l.rank, false, "creation failed: " + describe(st, tidegate_last_error()), 0);
  }
  std::vector<float> params(1000, 0.5f);
  auto step = [&](tidegate_comm_t c, int rank, int s) {
    std::vector<float> grad(params.size());
    for (size_t i = 0; i < grad.size(); ++i)
      grad[i] = 0.001f * static_cast<float>((i + rank + s) % 7);
    const tidegate_status_t st = allreduce(c, &grad, TIDEGATE_AVG);
    if (st == TIDEGATE_OK) {
      for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grad[i];
    }
    return st;
  };
  int s = 0;
  for (; s < 3; ++s) {
    if (step(comm, l.rank, s) != TIDEGATE_OK) {
      return verdict(l.rank, false, "a step before the fault failed", 0);
    }
  }
  if (victim) fault_now(o);
  tidegate_status_t st = TIDEGATE_OK;
  while (st == TIDEGATE_OK) st = step(comm, l.rank, s);  // the step that meets the fault
  const std::string failure = tidegate_last_error();
  if (const tidegate_status_t destroyed = tidegate_comm_destroy(comm); destroyed != TIDEGATE_OK) {
    return verdict(l.rank, false, "destroy after the failure returned " + describe(destroyed, ""),
                   0);
  }
  // The survivors renumber themselves and rendezvous again through the same store.
  const int new_rank = l.rank < o.victim ? l.rank : l.rank - 1;
  setenv("TIDEGATE_RANK", std::to_string(new_rank).c_str(), 1);
  setenv("TIDEGATE_SIZE", std::to_string(l.size - 1).c_str(), 1);
  tidegate_comm_t rebuilt = nullptr;
  if (const tidegate_status_t created = l.create(&rebuilt); created != TIDEGATE_OK) {
    return verdict(l.rank, false, "rebuilding failed: " + describe(created, tidegate_last_error()),
                   0);
  }
  for (int k = 0; k < 3; ++k) {
    if (const tidegate_status_t again = step(rebuilt, new_rank, s + k); again != TIDEGATE_OK) {
      return verdict(l.rank, false,
                     "a step after rebuilding failed: " + describe(again, tidegate_last_error()),
                     0);
    }
  }
  // Bitwise identity of the parameters across the new group: the max and the min of each
  // element's bits agree only if every survivor holds the same bits.
  std::vector<int32_t> bits(params.size()), low, high;
  std::memcpy(bits.data(), params.data(), params.size() * sizeof(float));
  low = high = bits;
  tidegate_tensor_t lt =
      tidegate_host_tensor(low.data(), static_cast<int64_t>(low.size()), TIDEGATE_INT32);
  tidegate_tensor_t ht =
      tidegate_host_tensor(high.data(), static_cast<int64_t>(high.size()), TIDEGATE_INT32);
  const bool reduced = tidegate_allreduce(rebuilt, &lt, &lt, TIDEGATE_MIN) == TIDEGATE_OK &&
                       tidegate_allreduce(rebuilt, &ht, &ht, TIDEGATE_MAX) == TIDEGATE_OK;
  const bool identical = reduced && low == bits && high == bits;
  tidegate_comm_destroy(rebuilt);
  return verdict(l.rank, identical,
                 "rebuilt as rank " + std::to_string(new_rank) + " of " +
                     std::to_string(l.size - 1) + " after: " + failure +
                     (identical ? "; parameters identical on every survivor"
                                : "; parameters DIFFER between survivors"),
                 0);
}

}  // namespace

FaultOptions parse_fault_options(int argc, char** argv) {
  FaultOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--scenario")
      o.scenario = value;
    else if (flag == "--phase")
      o.phase = value;
    else if (flag == "--signal")
      o.signal = value;
    else if (flag == "--victim")
      o.victim = std::atoi(value.c_str());
    else if (flag == "--stamp")
      o.stamp = value;
    else if (flag == "--timeout-ms")
      o.timeout_ms = std::atoll(value.c_str());
  }
  return o;
}

int run_fault_check(const FaultOptions& options, Launcher& launcher) {
  FaultOptions o = options;
  if (o.victim < 0) o.victim = launcher.size - 1;
  // The launcher stops the others when the victim dies; they must still get to report.
  ::signal(SIGTERM, SIG_IGN);
  note_ready(o, launcher.rank);
  if (o.scenario == "fault") return run_fault(o, launcher);
  if (o.scenario.rfind("creation-", 0) == 0) return run_creation_failure(o, launcher);
  if (o.scenario == "stop-resume") return run_stop_resume(o, launcher);
  if (o.scenario == "rebuild") return run_rebuild(o, launcher);
  return verdict(launcher.rank, false, "unknown scenario " + o.scenario, 0);
}

}  // namespace tidegate::faults
