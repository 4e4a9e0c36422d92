// One rank of the fault tests (tests/faults/run_fault_case.sh drives them): a rank of the job
// is killed or stopped at a chosen phase, and every survivor must fail within the deadline with
// an error that names that rank; or the creation of the communicator fails for a reason one
// rank has, and every rank must report the real cause; or the survivors rebuild a
// communicator without the lost rank and continue.
//
// Each rank prints one verdict line, which the driver counts:
//   "fault-check: rank R: OK: ..."   this rank behaved as the scenario requires
//   "fault-check: rank R: BAD: ..."  it did not (the line says how)
// and exits kExitFailedAsExpected (survivors that failed as they must, so that the launcher
// ends the job) or 0 (a rank that completed as it must), 1 otherwise.
#pragma once

#include <functional>
#include <string>

#include "tidegate/tidegate.h"

namespace tidegate::faults {

inline constexpr int kExitFailedAsExpected = 3;

struct FaultOptions {
  // fault | creation-missing | creation-wrong-secret | creation-unreachable | stop-resume |
  // rebuild
  std::string scenario = "fault";
  std::string phase = "between";  // fault: creation | probe | mid | between
  std::string signal = "kill";    // fault: kill | stop
  int victim = -1;                // default: the last rank
  std::string stamp;              // file the victim writes "pid time_ns" to before the fault
  int64_t timeout_ms = 5000;      // TIDEGATE_TIMEOUT_MS the job runs with
};

// How this process creates a communicator (from the environment, or over MPI), and learns its
// rank and size before creating one.
struct Launcher {
  std::function<tidegate_status_t(tidegate_comm_t*)> create;
  int rank = 0;
  int size = 1;
};

FaultOptions parse_fault_options(int argc, char** argv);

// Runs the scenario on this rank; returns the process exit code.
int run_fault_check(const FaultOptions& options, Launcher& launcher);

}  // namespace tidegate::faults
