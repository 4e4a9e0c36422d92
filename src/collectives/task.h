// A collective in flight: a resumable task (UCC's post / progress / finalize) made of
// point-to-point transfers on one transport, driven by the communicator's progress thread.
// Bigger collectives are composed of smaller ones (ring allreduce = reduce-scatter task +
// allgather task).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/config.h"
#include "base/status.h"
#include "base/transport.h"
#include "collectives/collective_args.h"

namespace tidegate {

// What every task of one communicator shares.
struct TaskContext {
  Transport* transport = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  const Config* config = nullptr;
  uint32_t channel = 0;  // transport channel this task's messages use
};

class CollectiveTask {
 public:
  virtual ~CollectiveTask() = default;

  // Posts the first transfers. Called once, on the progress thread.
  virtual Status start() = 0;

  // Tests outstanding transfers, runs local work whose inputs have arrived (reductions,
  // copies) and posts the next transfers. Sets *done when the output is complete. Called
  // repeatedly on the progress thread after the transport made progress. An error ends the
  // task; the engine then aborts the communicator.
  virtual Status advance(bool* done) = 0;

  // Algorithm name for logs and benchmarks ("ring", "recursive_doubling", ...).
  virtual const char* algorithm() const = 0;
};

}  // namespace tidegate
