#include "engine/progress_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "collectives/algorithms.h"
#include "core/log.h"

namespace tidegate {

namespace {
// How long one progress() call may block. Short enough that a stop request or a deadline is
// noticed promptly, long enough that an idle communicator costs nothing measurable.
constexpr Milliseconds kMaxBlock(50);

std::string op_label(const CollectiveArgs& args) {
  return std::string(op_kind_name(args.kind)) + " op #" + std::to_string(args.op_seq);
}
}  // namespace

ProgressEngine::ProgressEngine(TaskContext context)
    : ProgressEngine(context, {context.transport}, nullptr) {}

ProgressEngine::ProgressEngine(TaskContext context, std::vector<Transport*> transports,
                               Planner* planner)
    : context_(context),
      transports_(std::move(transports)),
      planner_(planner),
      spin_us_(context.config != nullptr ? context.config->spin_us() : 0) {
  context_.transport = transports_.front();
  thread_running_ = true;
  thread_ = std::thread([this] { run(); });
}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_all();
  if (thread_.joinable()) thread_.join();
  // Anything still queued never ran: its buffers are about to be released by the caller.
  fail(aborted_error("communicator destroyed before the op ran"));
}

Status ProgressEngine::post(std::shared_ptr<Request> request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.is_ok()) {
      return Status(failure_.code(), "communicator already failed: " + failure_.message());
    }
    if (stopping_ || draining_) return aborted_error("communicator is being destroyed");
    queue_.push_back(std::move(request));
  }
  wake_all();
  return Status::ok();
}

Status ProgressEngine::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
  }
  wake_all();
  if (thread_.joinable()) thread_.join();
  return failure();
}

void ProgressEngine::wake_all() {
  for (Transport* transport : transports_) transport->wake();
}

void ProgressEngine::abort(const Status& reason) {
  // Thread-safe: fails every transfer, tells the peers.
  for (Transport* transport : transports_) transport->abort(reason);
  bool thread_gone = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The active op belongs to the progress thread: it applies the abort itself, unless it has
    // already exited (after an earlier failure), in which case nobody else touches the ops.
    if (thread_running_) pending_abort_ = reason;
    thread_gone = !thread_running_;
  }
  if (thread_gone) fail(reason);
  wake_all();
}

Status ProgressEngine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void ProgressEngine::fail_and_tell_peers(const Status& reason) {
  // Relayed even when the failure came from a peer (its abort, or a lost connection): a rank
  // that leaves without passing the root cause on would make the others see only "connection
  // lost" instead of the error that started it. The transport sends it at most once.
  for (Transport* transport : transports_) transport->abort(reason);
  fail(reason);
}

void ProgressEngine::fail(const Status& reason) {
  std::deque<std::shared_ptr<Request>> victims;
  std::shared_ptr<Request> active;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.is_ok()) failure_ = reason;
    victims.swap(queue_);
  }
  // The active op belongs to the progress thread; fail() is called either on that thread or
  // after it has been joined, so reading active_ here is safe.
  if (active_) {
    active_->complete(Status(reason.code(), op_label(active_->args()) + ": " + reason.message()));
    active_.reset();
    task_.reset();
    main_task_.reset();
  }
  for (auto& request : victims) {
    request->complete(Status(reason.code(), op_label(request->args()) +
                                                " was not run because the communicator failed "
                                                "earlier: " + reason.message()));
  }
}

bool ProgressEngine::start_next_op() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return false;
    active_ = std::move(queue_.front());
    queue_.pop_front();
  }
  Status status = make_active_task();
  if (status.is_ok()) status = task_->start();
  last_progress_ = Clock::now();
  started_ = last_progress_;
  if (!status.is_ok()) fail_and_tell_peers(status);
  return true;
}

void ProgressEngine::advance_active_op(bool transport_activity) {
  bool done = false;
  Status status = task_->advance(&done);
  if (status.is_ok() && done && main_task_) {
    // The identity check passed on every rank: run the op itself on its own transport.
    task_ = std::move(main_task_);
    context_.transport = main_transport_;
    done = false;
    status = task_->start();
    if (status.is_ok()) status = task_->advance(&done);
  }
  if (status.is_ok() && done) {
    if (planner_ != nullptr) {
      if (active_args_.replan_round) {
        // Every rank now holds the same sums: every rank re-plans (or not) identically.
        if (planner_->apply_replan_statistics(replan_buffer_.data())) {
          TG_LOG(kInfo, "rank " + std::to_string(context_.rank), "re-planned:\n" + planner_->plan_table());
        }
      } else {
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - started_).count();
        planner_->record(active_args_, decision_, us);
      }
    }
    active_->complete(Status::ok());
    active_.reset();
    task_.reset();
    return;
  }
  const Clock::time_point now = Clock::now();
  if (transport_activity) last_progress_ = now;
  if (status.is_ok() && now - last_progress_ > Milliseconds(context_.config->timeout_ms())) {
    status = timeout_error(op_label(active_->args()) + " (" + task_->algorithm() +
                           ") made no progress for " + std::to_string(context_.config->timeout_ms()) +
                           " ms (TIDEGATE_TIMEOUT_MS) on rank " + std::to_string(context_.rank) +
                           ": a peer is stalled or dead, or did not post this collective");
  }
  if (!status.is_ok()) {
    TG_LOG(kError, "rank " + std::to_string(context_.rank), status.to_string());
    fail_and_tell_peers(status);
  }
}

Status ProgressEngine::make_active_task() {
  active_args_ = active_->args();
  if (planner_ == nullptr) {
    context_.transport = transports_.front();
    return make_collective_task(context_, active_args_, &task_);
  }
  if (active_args_.replan_round) {
    replan_buffer_.assign(static_cast<size_t>(planner_->replan_statistics_count()), 0.0);
    planner_->fill_replan_statistics(replan_buffer_.data());
    active_args_.input.data = replan_buffer_.data();
    active_args_.output.data = replan_buffer_.data();
    active_args_.input.count = active_args_.output.count = planner_->replan_statistics_count();
  }
  TG_RETURN_IF_ERROR(planner_->choose(active_args_, &decision_));
  context_.transport = transports_[static_cast<size_t>(decision_.transport_index)];
  main_task_.reset();
  if (decision_.transport_index == 0 && decision_.algorithm != "native") {
    return make_collective_task_with(context_, active_args_, decision_.algorithm, &task_);
  }
  // Ranks whose op arguments differ (a count mismatch) may plan different transports or a
  // native collective, whose messages never meet the others': nothing would then compare
  // their headers and the op would hang until the deadline. So such an op first checks its
  // identity on the first transport, in the messages tidegate's own algorithms start with: a
  // header-only dissemination round carrying the op's header. A rank that planned otherwise
  // sends its first message there too, and the mismatch is named at once.
  TG_RETURN_IF_ERROR(make_collective_task_with(context_, active_args_, decision_.algorithm, &main_task_));
  main_transport_ = context_.transport;
  context_.transport = transports_.front();
  return make_identity_check_task(context_, active_args_, &task_);
}

// The active op waits for peers. Poll first, for up to TIDEGATE_SPIN_US, and block for events
// only when nothing moved by then: a peer's reply to a small message usually comes within tens
// of microseconds, and sleeping in the kernel for it costs a wake-up (a scheduler round trip)
// per message round, which on a busy host doubled the time of a 1 KiB allreduce. Yielding
// between polls leaves the CPU to a peer rank that shares it.
Status ProgressEngine::wait_on_wire() {
  TG_RETURN_IF_ERROR(context_.transport->progress(Milliseconds(0), &last_activity_));
  if (last_activity_) return Status::ok();
  const auto spin_until = Clock::now() + std::chrono::microseconds(spin_us_);
  while (Clock::now() < spin_until) {
    std::this_thread::yield();
    TG_RETURN_IF_ERROR(context_.transport->progress(Milliseconds(0), &last_activity_));
    if (last_activity_) return Status::ok();
  }
  return context_.transport->progress(kMaxBlock, &last_activity_);
}

Status ProgressEngine::progress_idle() {
  // One transport blocks as before; several share the wait so each is looked at promptly.
  const Milliseconds share(std::max<int64_t>(1, kMaxBlock.count() / static_cast<int64_t>(transports_.size())));
  for (Transport* transport : transports_) {
    bool activity = false;
    TG_RETURN_IF_ERROR(transport->progress(transports_.size() == 1 ? kMaxBlock : share, &activity));
  }
  return Status::ok();
}

void ProgressEngine::run() {
  while (true) {
    bool idle = false;
    Status abort_reason;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      abort_reason = std::exchange(pending_abort_, Status::ok());
      idle = !active_ && queue_.empty();
      if (abort_reason.is_ok() && (stopping_ || (idle && (draining_ || !failure_.is_ok())))) {
        thread_running_ = false;
        return;
      }
    }
    if (!abort_reason.is_ok()) {
      fail(abort_reason);
      continue;  // the next pass exits: failure_ is set and nothing is left
    }
    if (!active_) {
      if (!start_next_op()) {
        Status st = progress_idle();
        if (!st.is_ok()) fail_and_tell_peers(st);
        continue;
      }
      if (!active_) continue;  // the op failed to start
    }
    advance_active_op(last_activity_);
    last_activity_ = false;
    if (!active_) continue;  // finished (or failed) without waiting on the wire
    Status st = wait_on_wire();
    if (!st.is_ok()) fail_and_tell_peers(st);
  }
}

}  // namespace tidegate
