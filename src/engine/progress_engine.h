// The progress engine: one thread per communicator that runs posted collectives in posting
// order as resumable tasks over the transport. It owns every deadline of a running
// collective: an op that makes no progress for TIDEGATE_TIMEOUT_MS fails with a timeout, and
// any failure aborts the transport (so peers learn of it) and fails every later op with the
// first error, because after a failed collective the ranks no longer agree on what was sent.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/task.h"
#include "core/transport.h"
#include "engine/request.h"
#include "select/planner.h"

namespace tidegate {

class ProgressEngine {
 public:
  // Runs every op on `context.transport` with the fixed algorithm rule (tests, one transport).
  explicit ProgressEngine(TaskContext context);
  // Runs each op on the transport and algorithm `planner` chooses among `transports`, records
  // its duration for the planner and runs the re-planning rounds. Both must outlive the engine.
  ProgressEngine(TaskContext context, std::vector<Transport*> transports, Planner* planner);
  ~ProgressEngine();  // stops the thread (call drain() first for a graceful end)

  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Queues a request (its op_seq already assigned in posting order). Thread-safe. Fails at
  // once, without queueing, when the communicator has already failed.
  Status post(std::shared_ptr<Request> request);

  // Waits until every queued op has finished or failed (each under its own deadline), then
  // stops the thread. Returns the communicator's failure, if any.
  Status drain();

  // Fails every pending op with `reason`, tells the peers, stops the thread. Thread-safe.
  void abort(const Status& reason);

  // The first failure of this communicator (ok while healthy). Thread-safe.
  Status failure() const;

 private:
  void run();
  // Starts the next queued op if none is active; returns false when the queue is empty.
  bool start_next_op();
  // Advances the active op; on completion or failure completes its request.
  void advance_active_op(bool transport_activity);
  // Fails the active and queued ops with `reason` (first failure wins).
  void fail(const Status& reason);
  // fail() after telling every peer (the transport's abort frames).
  void fail_and_tell_peers(const Status& reason);
  // Builds the active op's task on the transport and algorithm the planner chooses.
  Status make_active_task();
  void wake_all();
  // Drives the transports while no op is active, so that a peer's abort or death is noticed.
  Status progress_idle();
  // Drives the active op's transport until something moved or kMaxBlock passed.
  Status wait_on_wire();

  TaskContext context_;
  std::vector<Transport*> transports_;  // context_.transport is the active op's
  Planner* planner_ = nullptr;          // nullptr: fixed rule on transports_[0]
  const int64_t spin_us_;               // TIDEGATE_SPIN_US: polling before blocking
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<Request>> queue_;  // guarded by mutex_
  Status failure_;                               // guarded by mutex_
  bool stopping_ = false;                        // guarded by mutex_
  bool draining_ = false;                        // guarded by mutex_
  bool thread_running_ = false;                  // guarded by mutex_
  Status pending_abort_;                         // guarded by mutex_; applied by the thread

  // Owned by the progress thread.
  std::shared_ptr<Request> active_;
  std::unique_ptr<CollectiveTask> task_;
  std::unique_ptr<CollectiveTask> main_task_;  // runs after task_ (the identity check) is done
  Transport* main_transport_ = nullptr;        // main_task_'s transport
  CollectiveArgs active_args_;     // the active op's arguments as its task sees them
  PlanDecision decision_;
  Clock::time_point started_;
  std::vector<double> replan_buffer_;  // the re-planning round's statistics, in place
  Clock::time_point last_progress_;
  bool last_activity_ = false;

  std::thread thread_;
};

}  // namespace tidegate
