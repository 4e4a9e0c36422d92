// The gradient session's scheduler thread: negotiation rounds, posting the scheduled ops, and
// their completion (gradient_session.h explains the agreement and the double buffering).
#include <chrono>
#include <cstring>

#include "api/gradient_session.h"

namespace tidegate {

namespace {

int64_t millis_since(Clock::time_point since) {
  return std::chrono::duration_cast<Milliseconds>(Clock::now() - since).count();
}

}  // namespace

void GradientSession::run() {
  while (true) {
    int64_t step = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // A step starts with this rank's first ready(); a failed session schedules nothing more.
      changed_.wait(lock, [&] { return stopping_ || (failure_.is_ok() && marked_ > 0); });
      if (stopping_) return;
      step = step_;
    }
    Status st = run_step(step);
    if (!st.is_ok()) fail(st);
  }
}

Status GradientSession::run_step(int64_t step) {
  const size_t n = gradients_.size();
  const int size = comm_->size();
  schedule_.begin_step();
  std::vector<Clock::time_point> partly_ready_since(n);
  bool stuck = false;
  uint64_t seen_version = 0;
  auto snapshot = [&] {
    std::vector<int32_t> mine(n + 1, 0);
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < n; ++i) mine[i] = gradients_[i].marked_step == step ? 1 : 0;
    mine[n] = stuck ? 1 : 0;
    seen_version = ready_version_;
    return mine;
  };
  std::shared_ptr<Request> round;
  std::shared_ptr<std::vector<int32_t>> counts;
  TG_RETURN_IF_ERROR(post_negotiation(snapshot(), &round, &counts));
  int64_t cycles = 0;
  while (true) {
    TG_RETURN_IF_ERROR(await(round));
    ++cycles;
    schedule_.agree(counts->data(), size);
    if ((*counts)[n] > 0) return stuck_error(*counts, step);
    if (schedule_.everything_agreed()) {
      TG_RETURN_IF_ERROR(post_ops(schedule_.next_batch(/*all=*/true)));
      break;
    }
    // Partly ready gradients: marked on some ranks, not on others. Past the deadline, this rank
    // says so in its next snapshot; the round that carries it ends the step everywhere.
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      const int32_t on = (*counts)[i];
      if (on == 0 || on == size) {
        partly_ready_since[i] = Clock::time_point();
      } else if (partly_ready_since[i] == Clock::time_point()) {
        partly_ready_since[i] = now;
      } else if (millis_since(partly_ready_since[i]) > comm_->config().timeout_ms()) {
        stuck = true;
      }
    }
    // Nothing to send and nothing in flight: wait (briefly) for this rank's next gradient
    // rather than negotiating in a tight loop. The other ranks' news comes with the round.
    if (schedule_.backlog_empty()) {
      std::unique_lock<std::mutex> lock(mutex_);
      if (outstanding_ops_ == 0) {
        changed_.wait_for(lock, std::chrono::microseconds(options_.cycle_us),
                          [&] { return stopping_ || ready_version_ != seen_version; });
      }
      if (stopping_)
        return aborted_error("gradient session destroyed during step " + std::to_string(step));
    }
    // The next round goes before this batch, so it completes when the previous batch has.
    TG_RETURN_IF_ERROR(post_negotiation(snapshot(), &round, &counts));
    TG_RETURN_IF_ERROR(post_ops(schedule_.next_batch(/*all=*/false)));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    current_.cycles = cycles;
  }
  // The step ends when the last op's completion marks its gradients done (pieces_done).
  // No deadline of its own: the engine bounds every op by its no-progress deadline, and a
  // long step that keeps moving must not be cut off.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return step_ > step || !failure_.is_ok() || stopping_; });
  if (failure_.is_ok() && step_ <= step) {
    return aborted_error("gradient session destroyed during step " + std::to_string(step));
  }
  return failure_;
}

Status GradientSession::post_negotiation(const std::vector<int32_t>& snapshot,
                                         std::shared_ptr<Request>* request,
                                         std::shared_ptr<std::vector<int32_t>>* result) {
  auto buffer = std::make_shared<std::vector<int32_t>>(snapshot);
  TG_RETURN_IF_ERROR(
      comm_->post(in_place_allreduce(buffer->data(), static_cast<int64_t>(buffer->size()),
                                     TIDEGATE_INT32, TIDEGATE_SUM),
                  request));
  // The buffer lives until the op is done, even if this step is given up before.
  (*request)->on_complete([buffer](const Status&) {});
  *result = std::move(buffer);
  return Status::ok();
}

// Waits for a negotiation round; the engine bounds it by its deadline. Looks up now and then so
// that destroying the session does not wait for a round the peers will never join.
Status GradientSession::await(const std::shared_ptr<Request>& request) {
  while (true) {
    Status status;
    if (request->test(&status)) return status;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return aborted_error("gradient session destroyed during a step");
    }
    Status st = request->wait(Deadline::after_ms(50));
    if (st.code() != TIDEGATE_ERR_TIMEOUT) return st;
  }
}

Status GradientSession::post_ops(const std::vector<ScheduledOp>& ops) {
  for (const ScheduledOp& op : ops) TG_RETURN_IF_ERROR(post_op(op));
  return Status::ok();
}

Status GradientSession::post_op(const ScheduledOp& op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_.ops == 0) current_.first_post = Clock::now();
    ++current_.ops;
    if (op.fused()) ++current_.fused_ops;
    if (op.chunk) ++current_.chunk_ops;
  }
  if (op.bytes == 0) {  // zero-element gradients: nothing to send
    pieces_done(op.pieces, Status::ok(), 0, /*posted=*/false);
    return Status::ok();
  }
  const Gradient& first = gradients_[op.pieces.front().gradient];
  CollectiveArgs args;
  std::shared_ptr<std::vector<char>> fused;
  if (first.info.compressed) {
    args = first.compressed;
  } else {
    if (op.fused()) {
      fused = std::make_shared<std::vector<char>>(static_cast<size_t>(op.bytes));
      size_t at = 0;
      for (const SchedulePiece& piece : op.pieces) {
        const TensorView& view = gradients_[piece.gradient].view;
        // A zero-size gradient may have no memory at all (data NULL): memcpy must not see it.
        if (view.bytes() > 0) std::memcpy(fused->data() + at, view.data, view.bytes());
        at += view.bytes();
      }
      args = in_place_allreduce(fused->data(),
                                op.bytes / static_cast<int64_t>(dtype_size(first.info.dtype)),
                                first.info.dtype, options_.op);
    } else {
      const SchedulePiece& piece = op.pieces.front();
      const TensorView view = first.view.slice(piece.offset, piece.count);
      args = in_place_allreduce(view.data, view.count, view.dtype, options_.op);
    }
    args.rank_tree_order = true;  // the same bits fused, cut or alone
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++outstanding_ops_;
  }
  std::shared_ptr<Request> request;
  Status posted = comm_->post(std::move(args), &request);
  if (!posted.is_ok()) {
    pieces_done(op.pieces, posted, 0, /*posted=*/true);
    return posted;
  }
  std::vector<SchedulePiece> pieces = op.pieces;
  request->on_complete([this, pieces, fused, request_ptr = request.get()](const Status& status) {
    if (status.is_ok() && fused != nullptr) {
      size_t at = 0;
      for (const SchedulePiece& piece : pieces) {
        const TensorView& view = gradients_[piece.gradient].view;
        if (view.bytes() > 0) std::memcpy(view.data, fused->data() + at, view.bytes());
        at += view.bytes();
      }
    }
    pieces_done(pieces, status, request_ptr->bytes_sent(), /*posted=*/true);
  });
  return Status::ok();
}

// On the progress thread (a finished op) or the scheduler's: counts the pieces down, marks
// gradients done, and ends the step when the last one is.
void GradientSession::pieces_done(const std::vector<SchedulePiece>& pieces, const Status& status,
                                  uint64_t bytes_sent, bool posted) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (posted) --outstanding_ops_;
    if (!status.is_ok() && failure_.is_ok()) failure_ = status;
    current_.bytes_sent += bytes_sent;
    for (const SchedulePiece& piece : pieces) {
      Gradient& g = gradients_[piece.gradient];
      // A cut gradient is done with its last piece, whichever finishes last.
      g.elements_done += piece.count;
      if (g.elements_done < g.info.count || !status.is_ok()) continue;
      g.done_step = step_;
      ++done_;
    }
    if (failure_.is_ok() && done_ == gradients_.size()) {
      for (Gradient& g : gradients_) g.elements_done = 0;
      current_.last_done = Clock::now();
      last_ = current_;
      current_ = StepStats{};
      ++steps_finished_;
      ++step_;
      marked_ = done_ = 0;
    }
    // Notified under the lock: the destructor may be waiting for outstanding_ops_ to reach 0,
    // and once it sees that it destroys changed_; a notify after unlocking could still be
    // touching it (ThreadSanitizer caught exactly that).
    changed_.notify_all();
  }
}

Status GradientSession::stuck_error(const std::vector<int32_t>& counts, int64_t step) const {
  const int size = comm_->size();
  std::string keys;
  int listed = 0;
  for (size_t i = 0; i + 1 < counts.size() && listed < 8; ++i) {
    if (counts[i] == 0 || counts[i] == size) continue;
    bool mine = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      mine = gradients_[i].marked_step == step;
    }
    keys += std::string(listed++ ? "; " : "") + "key " + std::to_string(gradients_[i].info.key) +
            " on " + std::to_string(counts[i]) + " of " + std::to_string(size) +
            " ranks (this rank: " + (mine ? "marked" : "not marked") + ")";
  }
  return mismatch_error("gradient session step " + std::to_string(step) +
                        ": gradients marked ready on some ranks only for more than " +
                        std::to_string(comm_->config().timeout_ms()) +
                        " ms (TIDEGATE_TIMEOUT_MS): " + keys +
                        ". Every rank must mark every registered gradient once per step.");
}

}  // namespace tidegate
