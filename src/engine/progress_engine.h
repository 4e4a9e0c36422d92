// The progress engine: one thread per communicator that runs posted collectives as resumable
// tasks over the transports, several at once.
//
// The window: up to TIDEGATE_OPS_IN_FLIGHT ops are in flight together, op k on window slot
// k % window and so on that channel of its transport (a transport with fewer channels than the
// window maps several slots onto one channel; see ActiveOp's lanes). Ops enter the window in
// posting order, a phase starts only when no earlier op still holds its lane, and requests
// complete in posting order even when a later op finishes first. So every rank sends the same
// messages in the same order on every lane, whatever the local timing, and results stay
// bitwise identical. A re-planning round is a fence: no later op enters the window before it
// finished, so every rank plans the ops after it with the same plan.
//
// Deadlines and failure: each op has its own no-progress deadline (TIDEGATE_TIMEOUT_MS since
// the later of its start and the last activity of the transport its phase runs on). The first
// failure of any op aborts the transports (so peers learn of it) and fails that op and every
// other op, in flight or queued, with that error: after a failed collective the ranks no longer
// agree on what was sent.
//
// Who drives: one thread at a time runs the engine (the window, the transports, the codec
// state), the one holding driver_mutex_. That is the progress thread, except while a caller of
// a blocking collective finds it not busy: the caller then runs the engine itself until its op
// finished (wait_running), as gloo runs every op, so a small op costs its messages only and not
// a hand-over to the progress thread and back (two wake-ups of a sleeping thread, most of a
// 1 KiB allreduce's time on a busy host). So that the next blocking call finds it free, the
// progress thread parks for a moment after an op (kParkAfterOp) without touching the
// transports; after that it watches them while idle, as before, so a peer's abort or liveness
// notice is answered. Which thread drives changes nothing on the wire.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/transport.h"
#include "collectives/compressed/compression_state.h"
#include "collectives/task.h"
#include "engine/active_op.h"
#include "engine/native_prediction.h"
#include "engine/request.h"
#include "select/planner.h"

namespace tidegate {

// How long a rank that finds it was stalled itself waits for its peers' verdict (an abort or
// a lost connection, which the transports report after their own grace) before it reports a
// timeout.
inline constexpr int64_t kPeerVerdictWaitMs = 800;

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
  // once, without queueing, when the communicator has already failed. `caller_waits`: the
  // poster calls wait_running() on it next, so a parked progress thread is left asleep.
  Status post(std::shared_ptr<Request> request, bool caller_waits = false);

  // Waits for `request` (posted here) and returns its status. While no other thread drives the
  // engine (see "Who drives"), the calling thread does, until its request finished; otherwise
  // it waits for the driver. Bounded like every op by the ops' deadlines. Thread-safe.
  Status wait_running(const std::shared_ptr<Request>& request);

  // Waits until every queued op has finished or failed (each under its own deadline), then
  // stops the thread. Returns the communicator's failure, if any.
  Status drain();

  // Fails every pending op with `reason`, tells the peers, stops the thread. Thread-safe.
  void abort(const Status& reason);

  // The first failure of this communicator (ok while healthy). Thread-safe.
  Status failure() const;

  // Ops that may be in flight at once (TIDEGATE_OPS_IN_FLIGHT).
  int window() const { return window_; }

  // The communicator's codec state. Touch it only from the driver: in a local op
  // (CollectiveArgs::local_work), which runs there between the ops posted before and after it.
  CompressionState* compression_state() { return &compression_; }

 private:
  void run();
  // The progress thread between ops: parks without the transports for a moment after an op
  // (so a blocking caller can drive), then watches them (progress_idle). `driver` is held on
  // entry and on return.
  void idle(std::unique_lock<std::mutex>& driver);
  void set_caller_driving(bool driving);
  // Polls, without waiting, the transports no running op uses, every quarter liveness interval
  // (a caller that drives a run of blocking calls). Driver only.
  void poll_quiet_transports();
  // Takes a pending abort (from abort() on another thread); ok when none. Driver only.
  Status take_pending_abort();
  // The part of an engine pass after admitting ops: advance, complete in order, check the
  // deadlines, wait on the wire when nothing moved. Driver only.
  void advance_and_wait();
  // Moves queued ops into the window while it has room (progress thread). A local op runs here,
  // once the window is empty.
  void admit_ops();
  // The dense allreduce inside a compressed op (SubAllreduceFactory): the plan's own algorithm
  // for its size on the calling task's transport.
  Status make_sub_allreduce_task(const TaskContext& context, const CollectiveArgs& args,
                                 std::unique_ptr<CollectiveTask>* task) const;
  bool any_local_work() const;
  // Builds an admitted op's phases on the transport and algorithm chosen for it, led by a
  // predicted native collective when the ops before it make a prediction.
  Status plan_op(ActiveOp& op);
  Status plan_phases(ActiveOp& op);
  // The leading phase of an op planned under `prediction` (native_prediction.h).
  PredictedNativeTask* add_predicted_phase(ActiveOp& op, const NativePrediction& prediction);
  // A phase of `op` on `transport`: its context, channel and lane (no task yet).
  OpPhase new_phase(ActiveOp& op, Transport* transport, bool native);
  Status plan_auto_op(ActiveOp& op);
  Status add_phase(ActiveOp& op, Transport* transport, const AlgorithmRow& algorithm);
  // The identity check phase (a header round on the first transport) before the op's own.
  Status add_identity_check(ActiveOp& op);
  // Starts the phases whose lanes are free and advances the running ones; returns whether any
  // phase finished.
  bool advance_ops();
  Status advance_op(size_t index, bool* phase_finished);
  bool lane_free(size_t index, const Lane& lane) const;
  // Whether every op before `index` that the predictor recorded as native has finished.
  bool earlier_native_ops_finished(size_t index) const;
  // An op's last phase finished: the planner learns from it (or applies a re-planning round).
  void on_op_finished(ActiveOp& op);
  // Completes finished ops at the front of the window, in posting order.
  void complete_in_order();
  Status check_deadlines(Clock::time_point now);
  // The error of `op`, whose deadline passed: it names the ranks the op waits for, and, when
  // this rank itself was stalled meanwhile, reports the peers' verdict instead if one arrives.
  Status deadline_failure(ActiveOp& op);
  // Drives the transports for up to `budget`; returns the first failure they report.
  Status await_peer_verdict(Milliseconds budget);
  // How often a stalled op sends liveness notices (a quarter of the deadline, 50 ms to 1 s).
  Milliseconds liveness_interval() const;
  // The peers no transport has heard anything from for three liveness intervals (empty when no
  // transport tracks liveness).
  std::vector<int> silent_peers(Clock::time_point now) const;
  // Fails every op in flight and queued with `reason` (first failure wins).
  void fail(const Status& reason);
  // fail() after telling every peer (the transport's abort frames).
  void fail_and_tell_peers(const Status& reason);
  void wake_all();
  // Drives the transports while no op is in flight, so that a peer's abort or death is noticed.
  Status progress_idle();
  // Drives the transports of the running phases until something moved or kMaxBlock passed;
  // records which transports moved in transport_activity_.
  Status wait_on_wire(bool poll_only);
  Status poll_transports(const std::vector<size_t>& indexes, Milliseconds wait, bool* any);
  // transport->progress(wait), noting when the call took far longer than it may block (this
  // process was stopped meanwhile: see self_stall_).
  Status progress_transport(Transport* transport, Milliseconds wait, bool* activity);
  // Notes the time; a gap since the last note longer than `allowed` (what the thread may have
  // blocked for) plus kSelfStallGap means this process did not run: recorded in self_stall_.
  void observe_running(Milliseconds allowed);
  size_t transport_index(const Transport* transport) const;

  TaskContext context_;                 // the template of every phase's context
  std::vector<Transport*> transports_;  // the communicator's, in its order
  Planner* planner_ = nullptr;          // nullptr: fixed rule on transports_[0]
  const int64_t spin_us_;               // TIDEGATE_SPIN_US: polling before blocking
  const int window_;                    // TIDEGATE_OPS_IN_FLIGHT
  std::mutex driver_mutex_;             // held by the thread that drives (see "Who drives")
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<Request>> queue_;  // guarded by mutex_
  Status failure_;                              // guarded by mutex_
  bool stopping_ = false;                       // guarded by mutex_
  bool draining_ = false;                       // guarded by mutex_
  bool thread_running_ = false;                 // guarded by mutex_
  Status pending_abort_;                        // guarded by mutex_; applied by the driver
  bool parked_ = false;          // guarded by mutex_: the progress thread is parked (see idle())
  bool unpark_ = false;          // guarded by mutex_: work for the parked progress thread
  bool caller_driving_ = false;  // guarded by mutex_: a caller holds driver_mutex_
  std::condition_variable park_cv_;  // with mutex_: wakes the parked progress thread

  // Owned by the driver (driver_mutex_).
  CompressionState compression_;
  NativePredictor native_predictor_;      // the last ops planned (TIDEGATE_NATIVE_PREDICTION)
  Clock::time_point last_op_finished_;    // when the driver last completed an op
  const Request* waiter_ = nullptr;       // the request of the caller driving, if one does
  Clock::time_point last_quiet_poll_;     // see poll_quiet_transports()
  bool large_op_spin_pays_ = true;        // see wait_on_wire()
  std::deque<ActiveOp> active_;           // the window, in posting order
  std::vector<bool> transport_activity_;  // per transport: moved in the last wait_on_wire()
  // The last time the progress thread found it had not run for a while, and for how long.
  Clock::time_point self_stall_seen_at_;
  Clock::duration self_stall_{};
  Clock::time_point last_liveness_sent_;
  Clock::time_point last_observed_;

  std::thread thread_;
};

}  // namespace tidegate
