// The gradient session behind tidegate_session_* (tidegate.h): registration, per-step
// readiness, and the scheduler thread that negotiates readiness with the other ranks and posts
// the ops GradientSchedule (engine/gradient_schedule.h) cuts the agreed backlog into.
//
// Agreement, and why every rank posts the same ops in the same order:
//   1. A step's scheduler runs rounds. Round k posts one allreduce (int32 SUM) of this rank's
//      readiness snapshot: 1 per gradient marked ready, plus one "stuck" slot. Every rank posts
//      round k+1 only after round k's result, so rounds are the same ops on every rank.
//   2. The result is the same bits everywhere, so GradientSchedule, a deterministic function of
//      the registration (compared at creation) and the results so far, gives every rank the
//      same ops; each rank posts them right after the next round's allreduce. A rank's local
//      timing decides only when its own readiness shows up in a round, never what the ops are.
//   3. A round whose result says every gradient is agreed is the step's last: all ranks stop
//      negotiating at the same round and post the rest of the backlog.
// Overlap: requests complete in posting order, so round k+1 (posted before batch k) finishes
// when batch k-1 has: at most two batches are outstanding (double buffering), which is the
// credit that bounds how long a high-priority gradient agreed late waits.
// A gradient some ranks mark and others do not stays partly ready; a rank that has seen it so
// for TIDEGATE_TIMEOUT_MS sets its stuck slot, and the round that carries it fails the session on
// every rank alike, naming the keys.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/communicator.h"
#include "base/status.h"
#include "engine/gradient_schedule.h"
#include "tidegate/tidegate.h"

namespace tidegate {

class GradientSession {
 public:
  static Status create(Communicator* comm, const tidegate_gradient_t* gradients, int64_t count,
                       const tidegate_session_options_t* options,
                       std::unique_ptr<GradientSession>* out);
  ~GradientSession();

  Status ready(uint64_t key);
  Status wait(uint64_t key, int64_t timeout_ms);
  Status wait_all(int64_t timeout_ms);
  Status step(tidegate_session_stats_t* stats);
  tidegate_session_options_t options_used() const { return options_; }

 private:
  struct Gradient {
    SessionGradient info;
    TensorView view;
    CollectiveArgs compressed;  // a compressed gradient's op (buffers set), else unused
    int64_t marked_step = -1;   // the step it was last marked ready in
    int64_t done_step = -1;     // the step its result last arrived in
    int64_t elements_done = 0;  // of the current step: the gradient is done at its count
  };
  struct StepStats {
    int64_t ops = 0, fused_ops = 0, chunk_ops = 0, cycles = 0;
    Clock::time_point first_post, last_done;
    uint64_t bytes_sent = 0;
  };

  GradientSession(Communicator* comm, std::vector<Gradient> gradients,
                  tidegate_session_options_t options, ScheduleKnobs knobs);

  // The session's own ops: an allreduce in place on `count` elements at `data`.
  static CollectiveArgs in_place_allreduce(void* data, int64_t count, tidegate_dtype_t dtype,
                                           tidegate_reduce_op_t op);
  Status check_registration_matches();
  size_t index_of(uint64_t key, Status* status) const;
  void run();
  Status run_step(int64_t step);
  Status post_negotiation(const std::vector<int32_t>& snapshot, std::shared_ptr<Request>* request,
                          std::shared_ptr<std::vector<int32_t>>* result);
  Status await(const std::shared_ptr<Request>& request);
  Status post_ops(const std::vector<ScheduledOp>& ops);
  Status post_op(const ScheduledOp& op);
  void pieces_done(const std::vector<SchedulePiece>& pieces, const Status& status,
                   uint64_t bytes_sent, bool posted);
  Status stuck_error(const std::vector<int32_t>& counts, int64_t step) const;
  void fail(const Status& status);
  Status wait_until(int64_t timeout_ms, const std::function<bool()>& done_or_failed,
                    const std::string& what);

  Communicator* comm_;
  tidegate_session_options_t options_;
  GradientSchedule schedule_;  // the scheduler thread's alone

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Gradient> gradients_;  // registration fixed; the per-step fields guarded by mutex_
  int64_t step_ = 0;                 // the step being marked and synchronised
  size_t marked_ = 0, done_ = 0;     // of the current step
  uint64_t ready_version_ = 0;       // bumped by every ready()
  int64_t outstanding_ops_ = 0;      // posted data ops not finished (any step)
  int64_t steps_finished_ = 0;
  StepStats current_, last_;
  Status failure_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tidegate
