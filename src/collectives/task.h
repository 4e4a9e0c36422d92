// A collective in flight: a resumable task (UCC's post / progress / finalize) made of
// point-to-point transfers on one transport, driven by the communicator's progress thread.
// Bigger collectives are composed of smaller ones (ring allreduce = reduce-scatter task +
// allgather task).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/config.h"
#include "base/status.h"
#include "base/transport.h"
#include "collectives/collective_args.h"

namespace tidegate {

class CollectiveTask;
class CompressionState;
struct TaskContext;

// Builds the task of a dense allreduce that a compressed algorithm runs inside itself
// (PowerSGD's P and Q, shared-index random-k's values): the engine supplies one that picks the
// plan's algorithm for that size on the calling task's transport and channel.
using SubAllreduceFactory = std::function<Status(
    const TaskContext& context, const CollectiveArgs& args, std::unique_ptr<CollectiveTask>* task)>;

// What every task of one communicator shares.
struct TaskContext {
  Transport* transport = nullptr;
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  const Config* config = nullptr;
  uint32_t channel = 0;  // transport channel this task's messages use
  // The communicator's codec state (error feedback, PowerSGD's Q, top-k thresholds); needed by
  // compressed algorithms only (nullptr elsewhere).
  CompressionState* compression = nullptr;
  // Empty: suballreduces run the ring.
  SubAllreduceFactory sub_allreduce;
  // When set, every payload byte this task sends is counted here (the op's bytes on the wire,
  // which tidegate_request_bytes_sent reports).
  uint64_t* bytes_sent = nullptr;
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

  // True while the task has local work left that no message is needed for (encoding the next
  // pieces of a pipeline): the engine then calls advance() again at once instead of waiting for
  // the wire.
  virtual bool has_local_work() const { return false; }
  // Once done: true when this task, though not the op's last phase, did the op's whole work (the
  // predicted native allreduce, allreduce/predicted_native.h), so the engine skips the phases
  // planned after it. The same on every rank.
  virtual bool completed_the_op() const { return false; }
};

}  // namespace tidegate
