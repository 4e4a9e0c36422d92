#include "engine/progress_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "base/log.h"
#include "collectives/algorithm_table.h"
#include "collectives/compressed/flush_task.h"
#include "select/size_rule.h"

namespace tidegate {

namespace {
// The engine the current thread drives (its progress thread, or a caller in wait_running()).
thread_local const ProgressEngine* t_driving = nullptr;
// How long one progress() call may block. Short enough that a stop request or a deadline is
// noticed promptly, long enough that an idle communicator costs nothing measurable.
constexpr Milliseconds kMaxBlock(50);
// A pass of the progress loop that started this long after the previous one means the process
// did not run in between (SIGSTOP, a debugger, heavy swapping): every pass blocks for at most
// kMaxBlock, and work between passes is bounded.
constexpr Milliseconds kSelfStallGap(1000);
// How long the progress thread parks after an op, off the transports, so that the next blocking
// call can run its op on its own thread (see "Who drives"). Short against the liveness interval
// (>= 50 ms, and a peer waits three of them before it calls a rank silent), so a peer's notice
// is still answered in time; long enough to span the gap between a trainer's small ops.
constexpr Milliseconds kParkAfterOp(5);
// The largest op the engine polls for (TIDEGATE_SPIN_US) rather than sleeping at once: the
// latency-bound sizes, where a reply comes within tens of microseconds (wait_on_wire()).
constexpr size_t kSpinMaxOpBytes = size_t{256} << 10;
// How often a blocking caller that found another thread driving looks again whether it may
// drive (it is woken at once when its op completes).
constexpr std::chrono::microseconds kDriverRecheck(1000);

std::string seconds_text(Clock::duration d) {
  const int64_t tenths = std::chrono::duration_cast<Milliseconds>(d).count() / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

std::string op_label(const CollectiveArgs& args) {
  return std::string(op_kind_name(args.kind)) + " op #" + std::to_string(args.op_seq);
}

// `reason` as the error of the op labelled `label`: prefixed with the label unless the message
// already names that op (a deadline or mismatch error does), so it is not said twice.
Status for_op(const std::string& label, const Status& reason, const std::string& link = ": ") {
  const std::string& text = reason.message();
  for (size_t at = text.find(label); at != std::string::npos; at = text.find(label, at + 1)) {
    const size_t end = at + label.size();
    if (end == text.size() || text[end] < '0' || text[end] > '9') return reason;
  }
  return Status(reason.code(), label + link + text);
}

// Whether ranks that disagree on this op's arguments might never exchange a message that
// compares them, whatever the plan: a broadcast's tree is shaped by its root, so ranks that
// each take another rank for the root may wait on (or finish without) different peers. Such
// an op checks its identity first, like an op planned off the first transport.
bool shape_depends_on_arguments(const CollectiveArgs& args) {
  return args.kind == OpKind::kBroadcast;
}

// "rank 2" or "ranks 1, 3".
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  return text;
}

// The row to run instead of `row` for an op that must keep one rank-tree summation order
// (CollectiveArgs::rank_tree_order): recursive doubling for small tensors, Rabenseifner above,
// the same sizes the size rule gives them; `row` itself when it already keeps that order.
const AlgorithmRow* in_rank_tree_order(const Config& config, const CollectiveArgs& args,
                                       const AlgorithmRow* row) {
  if (!args.rank_tree_order || args.kind != OpKind::kAllreduce || args.compression.enabled()) {
    return row;
  }
  const std::string_view name = row != nullptr ? row->name : "";
  if (name == "recursive_doubling" || name == "rabenseifner") return row;
  const bool small =
      static_cast<int64_t>(args.input.bytes()) <= config.recursive_doubling_max_bytes();
  return find_algorithm(OpKind::kAllreduce, small ? "recursive_doubling" : "rabenseifner");
}

int window_of(const Config* config) {
  return config != nullptr ? static_cast<int>(config->ops_in_flight()) : 1;
}
}  // namespace

ProgressEngine::ProgressEngine(TaskContext context)
    : ProgressEngine(context, {context.transport}, nullptr) {}

ProgressEngine::ProgressEngine(TaskContext context, std::vector<Transport*> transports,
                               Planner* planner)
    : context_(context),
      transports_(std::move(transports)),
      planner_(planner),
      spin_us_(context.config != nullptr ? context.config->spin_us() : 0),
      window_(window_of(context.config)),
      native_predictor_(context.size),
      transport_activity_(transports_.size(), false) {
  context_.transport = transports_.front();
  thread_running_ = true;
  thread_ = std::thread([this] { run(); });
}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    unpark_ = true;
  }
  wake_all();
  if (thread_.joinable()) thread_.join();
  // Anything still queued never ran: its buffers are about to be released by the caller.
  fail(aborted_error("communicator destroyed before the op ran"));
}

Status ProgressEngine::post(std::shared_ptr<Request> request, bool caller_waits) {
  // A blocking call from the thread that drives this engine (a request callback, which runs
  // there) would wait for an op that only its own thread could run: refused before it is queued.
  if (caller_waits && t_driving == this) {
    return invalid_argument(op_label(request->args()) +
                            ": a blocking collective was called on the thread that runs this "
                            "communicator's ops (inside a request completion callback?); "
                            "callbacks must not wait for the same communicator");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.is_ok()) {
      return Status(failure_.code(),
                    op_label(request->args()) +
                        " was refused: the communicator already failed: " + failure_.message());
    }
    if (stopping_ || draining_) return aborted_error("communicator is being destroyed");
    queue_.push_back(std::move(request));
    // A parked progress thread holds no transport: the caller who waits next drives the op
    // itself, and waking the thread would only make it compete for the driver's seat. A
    // caller already driving must be woken, though: it may be blocked on the wire.
    if (caller_waits && parked_ && !caller_driving_ && context_.config->caller_runs()) {
      return Status::ok();
    }
    unpark_ = true;
  }
  wake_all();
  return Status::ok();
}

Status ProgressEngine::wait_running(const std::shared_ptr<Request>& request) {
  Status status;
  if (!context_.config->caller_runs()) return request->wait(Deadline(Clock::time_point::max()));
  while (!request->test(&status)) {
    std::unique_lock<std::mutex> driver(driver_mutex_, std::try_to_lock);
    if (!driver.owns_lock()) {
      // The progress thread drives (it runs this op, or it is about to hand the seat back).
      if (request->wait_until(Clock::now() + kDriverRecheck, &status)) return status;
      continue;
    }
    set_caller_driving(true);
    t_driving = this;
    waiter_ = request.get();
    while (!request->test(&status)) {
      observe_running(kMaxBlock);
      const Status abort_reason = take_pending_abort();
      if (!abort_reason.is_ok()) {
        fail(abort_reason);
        continue;
      }
      admit_ops();
      if (active_.empty()) break;  // nothing this thread can run (the request ends elsewhere)
      advance_and_wait();
      poll_quiet_transports();
    }
    waiter_ = nullptr;
    t_driving = nullptr;
    bool work_left = !active_.empty();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      caller_driving_ = false;
      work_left = work_left || !queue_.empty();
      if (work_left) unpark_ = true;
    }
    driver.unlock();
    // Ops of other threads are left in the window or the queue: the progress thread goes on.
    if (work_left) park_cv_.notify_all();
  }
  return status;
}

void ProgressEngine::set_caller_driving(bool driving) {
  std::lock_guard<std::mutex> lock(mutex_);
  caller_driving_ = driving;
}

void ProgressEngine::poll_quiet_transports() {
  // A run of blocking calls keeps the progress thread parked, and a driving caller polls only
  // the transports its ops run on: the others are looked at now and then, so that a peer's
  // liveness notice on them is answered as when the progress thread watched them between ops.
  const Clock::time_point now = Clock::now();
  if (now - last_quiet_poll_ < liveness_interval() / int64_t{4}) return;
  last_quiet_poll_ = now;
  for (Transport* transport : transports_) {
    bool activity = false;
    Status st = progress_transport(transport, Milliseconds(0), &activity);
    if (!st.is_ok()) {
      fail_and_tell_peers(st);
      return;
    }
  }
}

Status ProgressEngine::take_pending_abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(pending_abort_, Status::ok());
}

Status ProgressEngine::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
    unpark_ = true;
  }
  wake_all();
  if (thread_.joinable()) thread_.join();
  return failure();
}

void ProgressEngine::wake_all() {
  for (Transport* transport : transports_) transport->wake();
  park_cv_.notify_all();
}

void ProgressEngine::abort(const Status& reason) {
  // Thread-safe: fails every transfer, tells the peers.
  for (Transport* transport : transports_) transport->abort(reason);
  bool thread_gone = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The ops in flight belong to the progress thread: it applies the abort itself, unless it
    // has already exited (after an earlier failure), in which case nobody else touches them.
    if (thread_running_) pending_abort_ = reason;
    thread_gone = !thread_running_;
    unpark_ = true;
  }
  if (thread_gone) fail(reason);
  wake_all();
}

Status ProgressEngine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void ProgressEngine::fail_and_tell_peers(const Status& given) {
  // A failure found right after this process itself did not run for a while (SIGSTOP, a
  // debugger) is its peers' verdict on it: say so, rather than relay their timeout as ours. The
  // stall may have hit in the middle of a pass (a send that found the peers' abort), so it is
  // looked for here too.
  observe_running(kMaxBlock);
  Status reason = given;
  const bool just_stalled =
      Clock::now() - self_stall_seen_at_ < Milliseconds(kPeerVerdictWaitMs) + kSelfStallGap;
  if (just_stalled && given.message().find("did not run for") == std::string::npos) {
    reason = aborted_error("rank " + std::to_string(context_.rank) + " did not run for " +
                           seconds_text(self_stall_) +
                           " s (its process was stopped, e.g. by SIGSTOP, or starved), and its "
                           "peers failed the communicator meanwhile: " +
                           given.message());
  }
  // Relayed even when the failure came from a peer (its abort, or a lost connection): a rank
  // that leaves without passing the root cause on would make the others see only "connection
  // lost" instead of the error that started it. The transport sends it at most once.
  TG_LOG(kError, "rank " + std::to_string(context_.rank), reason.to_string());
  for (Transport* transport : transports_) transport->abort(reason);
  fail(reason);
}

void ProgressEngine::fail(const Status& reason) {
  std::deque<std::shared_ptr<Request>> victims;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.is_ok()) failure_ = reason;
    victims.swap(queue_);
  }
  // The window belongs to the progress thread; fail() is called either on that thread or after
  // it has been joined, so touching active_ here is safe. Completed in posting order.
  std::deque<ActiveOp> in_flight;
  in_flight.swap(active_);
  for (ActiveOp& op : in_flight) {
    op.request->complete(for_op(op_label(op.request->args()), reason));
  }
  for (auto& request : victims) {
    request->complete(Status(reason.code(), op_label(request->args()) +
                                                " was not run because the communicator failed "
                                                "earlier: " +
                                                reason.message()));
  }
}

void ProgressEngine::admit_ops() {
  while (static_cast<int>(active_.size()) < window_) {
    // A re-planning round in the window is a fence: the ops after it are planned with what it
    // decides, on every rank alike.
    if (!active_.empty() && active_.back().args.replan_round) return;
    std::shared_ptr<Request> request;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.empty()) return;
      // A local op waits for every op before it, and runs before any op after it.
      if (queue_.front()->args().local_work && !active_.empty()) return;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    if (request->args().local_work) {
      request->complete(request->args().local_work());
      continue;
    }
    for (ActiveOp& other : active_) other.ran_alone = false;
    active_.emplace_back();
    ActiveOp& op = active_.back();
    op.request = std::move(request);
    op.ran_alone = active_.size() == 1;
    op.started = op.last_progress = Clock::now();
    Status status = plan_op(op);
    if (!status.is_ok()) {
      fail_and_tell_peers(status);
      return;
    }
  }
}

OpPhase ProgressEngine::new_phase(ActiveOp& op, Transport* transport, bool native) {
  OpPhase phase;
  phase.context = context_;
  phase.context.transport = transport;
  phase.context.compression = &compression_;
  phase.context.bytes_sent = &op.bytes_sent;
  phase.context.sub_allreduce = [this](const TaskContext& context, const CollectiveArgs& args,
                                       std::unique_ptr<CollectiveTask>* task) {
    return make_sub_allreduce_task(context, args, task);
  };
  const uint32_t slot = static_cast<uint32_t>(op.args.op_seq % static_cast<uint64_t>(window_));
  const uint32_t channels = transport->capabilities().channels;
  phase.context.channel = channels == 0 ? slot : slot % channels;
  phase.lane = {transport, native ? Lane::kNativeChannel : phase.context.channel};
  return phase;
}

Status ProgressEngine::add_phase(ActiveOp& op, Transport* transport,
                                 const AlgorithmRow& algorithm) {
  OpPhase phase = new_phase(op, transport, algorithm.native());
  TG_RETURN_IF_ERROR(make_algorithm_task(phase.context, op.args, algorithm, &phase.task));
  if (algorithm.collective != OpKind::kInternal) {  // not an identity check or a residual flush
    const CompressionArgs& compression = op.args.compression;
    op.choice = std::string(transport->name()) + "/" + algorithm.name;
    if (compression.enabled()) op.choice += "+" + compression.codec->spec();
  }
  op.phases.push_back(std::move(phase));
  return Status::ok();
}

Status ProgressEngine::add_identity_check(ActiveOp& op) {
  TG_RETURN_IF_ERROR(add_phase(op, transports_.front(), identity_check_algorithm()));
  op.args.identity_checked = true;  // the phases after it may rely on it
  return Status::ok();
}

PredictedNativeTask* ProgressEngine::add_predicted_phase(ActiveOp& op,
                                                         const NativePrediction& prediction) {
  Transport* transport = transports_[static_cast<size_t>(prediction.transport_index)];
  OpPhase phase = new_phase(op, transport, true);
  phase.after_earlier_native_ops = true;
  auto task = std::make_unique<PredictedNativeTask>(phase.context, op.args, prediction);
  PredictedNativeTask* raw = task.get();
  phase.task = std::move(task);
  op.phases.push_back(std::move(phase));
  return raw;
}

Status ProgressEngine::plan_op(ActiveOp& op) {
  op.args = op.request->args();
  // A re-planning round is left out: every rank posts it at the same place (native_prediction.h).
  const bool predicts =
      planner_ != nullptr && !op.args.replan_round && context_.config->native_prediction();
  const std::optional<NativePrediction> prediction =
      predicts ? native_predictor_.next() : std::nullopt;
  PredictedNativeTask* predicted = nullptr;
  if (prediction) predicted = add_predicted_phase(op, *prediction);
  TG_RETURN_IF_ERROR(plan_phases(op));
  if (!predicts) return Status::ok();
  // Planning leaves the fields recorded alone (it marks the identity check, and only an auto
  // op, never recorded as native, has its codec and buffers set).
  const NativePredictor::Record record = native_predictor_.note_planned(op.args, op.decision);
  op.recorded_native = record.has_value();
  if (predicted != nullptr) predicted->set_contributes(record == prediction);
  return Status::ok();
}

Status ProgressEngine::plan_phases(ActiveOp& op) {
  CompressionArgs& compression = op.args.compression;
  if (compression.auto_codec) return plan_auto_op(op);
  if (compression.enabled()) {
    // In posting order, so every rank gives the key the same step.
    compression.step = compression_.next_step(compression.key);
  }
  if (planner_ == nullptr) {
    const AlgorithmRow* row = nullptr;
    TG_RETURN_IF_ERROR(fixed_algorithm(*context_.config, op.args, &row));
    row = in_rank_tree_order(*context_.config, op.args, row);
    if (compression.enabled()) {
      compression.algorithm = row->name;  // part of the op's identity on the wire
    }
    if (compression.enabled() || shape_depends_on_arguments(op.args)) {
      TG_RETURN_IF_ERROR(add_identity_check(op));
    }
    return add_phase(op, transports_.front(), *row);
  }
  if (op.args.replan_round) {
    op.replan_buffer.assign(static_cast<size_t>(planner_->replan_statistics_count()), 0.0);
    planner_->fill_replan_statistics(op.replan_buffer.data());
    op.args.input.data = op.args.output.data = op.replan_buffer.data();
    op.args.input.count = op.args.output.count = planner_->replan_statistics_count();
  }
  TG_RETURN_IF_ERROR(planner_->choose(op.args, &op.decision));
  if (const AlgorithmRow* tree =
          in_rank_tree_order(*context_.config, op.args, op.decision.algorithm);
      tree != op.decision.algorithm) {
    op.decision.algorithm = tree;
    op.decision.entry_index = op.decision.choice_index = -1;  // not the plan's choice: no record
  }
  Transport* chosen = transports_[static_cast<size_t>(op.decision.transport_index)];
  if (compression.enabled()) {
    // Compressed algorithms start in different shapes (an all-to-all, a ring, a suballreduce),
    // so ranks that disagree on the codec or the algorithm might not exchange a first message:
    // every compressed op checks its identity first, which names the disagreement.
    compression.algorithm = op.decision.algorithm->name;
    TG_RETURN_IF_ERROR(add_identity_check(op));
    return add_phase(op, chosen, *op.decision.algorithm);
  }
  // Ranks whose op arguments differ (a count mismatch) may plan different transports or a
  // native collective, whose messages never meet the others': nothing would then compare their
  // headers and the op would hang until the deadline. So such an op first checks its identity
  // on the first transport, in the messages tidegate's own algorithms start with. A rank that
  // planned otherwise sends its first message there too, and the mismatch is named at once.
  if (op.decision.transport_index != 0 || op.decision.algorithm->native() ||
      shape_depends_on_arguments(op.args)) {
    TG_RETURN_IF_ERROR(add_identity_check(op));
  }
  return add_phase(op, chosen, *op.decision.algorithm);
}

// Codec "auto": the codec plan picks dense or a codec for this op, on every rank alike (same
// plan, same agreed re-planning, same posting order).
Status ProgressEngine::plan_auto_op(ActiveOp& op) {
  CompressionArgs& compression = op.args.compression;
  // Every auto op advances its key's step, dense or not: the steps stay in posting order.
  compression.step = compression_.next_step(compression.key);
  const AlgorithmRow* row = nullptr;
  Transport* chosen = transports_.front();
  if (planner_ != nullptr) {
    TG_RETURN_IF_ERROR(planner_->choose_auto(op.args, &op.decision));
    chosen = transports_[static_cast<size_t>(op.decision.transport_index)];
    row = op.decision.algorithm;
  }
  if (op.decision.codec != nullptr) {
    compression.codec = op.decision.codec;
    compression.algorithm = row->name;
    TG_RETURN_IF_ERROR(add_identity_check(op));
    return add_phase(op, chosen, *row);
  }
  // Dense. A key that was compressed before holds residuals (error feedback): they go into this
  // dense send, so nothing the compressed steps held back is lost at the switch.
  const uint64_t key = compression.key;
  compression.codec = nullptr;
  compression.algorithm.clear();
  if (row == nullptr) TG_RETURN_IF_ERROR(fixed_algorithm(*context_.config, op.args, &row));
  if (compression_.has_residual(key)) {
    static const AlgorithmRow flush = {OpKind::kInternal, "flush_residual", kAlgorithmHostOnly,
                                       make_flush_residual_task, nullptr};
    TG_RETURN_IF_ERROR(add_phase(op, transports_.front(), flush));  // output = input + residuals
    op.args.input = op.args.output;  // the dense allreduce runs in place on input + residuals
  }
  if (op.decision.transport_index != 0 || row->native()) {
    TG_RETURN_IF_ERROR(add_identity_check(op));
  }
  return add_phase(op, chosen, *row);
}

bool ProgressEngine::earlier_native_ops_finished(size_t index) const {
  for (size_t j = 0; j < index; ++j) {
    if (active_[j].recorded_native && !active_[j].finished) return false;
  }
  return true;
}

bool ProgressEngine::lane_free(size_t index, const Lane& lane) const {
  for (size_t j = 0; j < index; ++j) {
    if (active_[j].holds(lane)) return false;
  }
  return true;
}

Status ProgressEngine::advance_op(size_t index, bool* phase_finished) {
  ActiveOp& op = active_[index];
  while (!op.finished) {
    OpPhase& phase = op.phases[op.current];
    if (!phase.started) {
      if (!lane_free(index, phase.lane)) return Status::ok();  // an earlier op goes first
      if (phase.after_earlier_native_ops && !earlier_native_ops_finished(index)) {
        return Status::ok();
      }
      phase.started = true;
      op.last_progress = Clock::now();
      TG_RETURN_IF_ERROR(phase.task->start());
    }
    bool done = false;
    TG_RETURN_IF_ERROR(phase.task->advance(&done));
    if (!done) return Status::ok();
    // A predicted native collective that every rank contributed to did the whole op: the
    // phases planned after it (identity check, the op's own) are skipped, on every rank alike.
    const bool op_done = phase.task->completed_the_op();
    phase.task.reset();
    *phase_finished = true;
    op.last_progress = Clock::now();
    op.current = op_done ? op.phases.size() : op.current + 1;
    if (op.current == op.phases.size()) {
      op.finished = true;
      on_op_finished(op);
    }
  }
  return Status::ok();
}

bool ProgressEngine::advance_ops() {
  bool any_finished = false;
  for (size_t i = 0; i < active_.size(); ++i) {
    Status status = advance_op(i, &any_finished);
    if (!status.is_ok()) {
      fail_and_tell_peers(status);  // fail() names each op it ends
      return true;
    }
  }
  return any_finished;
}

void ProgressEngine::on_op_finished(ActiveOp& op) {
  if (planner_ == nullptr) return;
  if (op.args.replan_round) {
    // Every rank now holds the same sums: every rank re-plans (or not) identically.
    if (planner_->apply_replan_statistics(op.replan_buffer.data())) {
      TG_LOG(kInfo, "rank " + std::to_string(context_.rank),
             "re-planned:\n" + planner_->plan_table() + planner_->codec_plan_tables());
    }
    return;
  }
  // An op that shared the wire with others says little about its own cost.
  if (!op.ran_alone) return;
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - op.started).count();
  planner_->record(op.args, op.decision, us);
}

void ProgressEngine::complete_in_order() {
  while (!active_.empty() && active_.front().finished) {
    std::shared_ptr<Request> request = std::move(active_.front().request);
    request->set_bytes_sent(active_.front().bytes_sent);
    request->set_choice(std::move(active_.front().choice));
    active_.pop_front();
    last_op_finished_ = Clock::now();
    const bool waiters_own = request.get() == waiter_;
    request->complete(Status::ok());
    // A caller driving for its own op stops there: the ops after it (other threads', with
    // callbacks that may take locks the caller holds) complete on the progress thread.
    if (waiters_own) return;
  }
}

Status ProgressEngine::make_sub_allreduce_task(const TaskContext& context,
                                               const CollectiveArgs& args,
                                               std::unique_ptr<CollectiveTask>* task) const {
  const AlgorithmRow* row =
      planner_ != nullptr ? planner_->own_algorithm_on(args, transport_index(context.transport))
                          : nullptr;
  if (row == nullptr) TG_RETURN_IF_ERROR(fixed_algorithm(*context_.config, args, &row));
  if (row->native()) row = find_algorithm(OpKind::kAllreduce, "ring");
  return make_algorithm_task(context, args, *row, task);
}

bool ProgressEngine::any_local_work() const {
  for (const ActiveOp& op : active_) {
    if (op.finished) continue;
    const OpPhase& phase = op.phases[op.current];
    if (phase.started && phase.task && phase.task->has_local_work()) return true;
  }
  return false;
}

Status ProgressEngine::check_deadlines(Clock::time_point now) {
  observe_running(kMaxBlock);
  const Milliseconds timeout(context_.config->timeout_ms());
  for (ActiveOp& op : active_) {
    OpPhase* phase = op.phase();
    if (phase == nullptr) continue;
    if (phase->started && transport_activity_[transport_index(phase->context.transport)]) {
      op.last_progress = now;
    }
    // An op waiting for an earlier op's lane is as stalled as that op: only the phases that
    // run can time out, and the earliest op always runs.
    if (!phase->started) continue;
    if (now - op.last_progress > timeout) return deadline_failure(op);
    if (now - op.last_progress > liveness_interval() &&
        now - last_liveness_sent_ > liveness_interval()) {
      // Stalled for a while: tell every peer this rank is alive (they answer), so that when the
      // deadline comes the ranks that gave no sign of life can be told from those that wait too.
      last_liveness_sent_ = now;
      for (Transport* transport : transports_) transport->send_liveness();
    }
  }
  return Status::ok();
}

Milliseconds ProgressEngine::liveness_interval() const {
  return std::clamp(Milliseconds(context_.config->timeout_ms() / 4), Milliseconds(50),
                    Milliseconds(1000));
}

std::vector<int> ProgressEngine::silent_peers(Clock::time_point now) const {
  std::vector<int> silent;
  bool tracked = false;
  for (Transport* transport : transports_) tracked |= transport->tracks_liveness();
  if (!tracked) return silent;
  for (int peer = 0; peer < context_.size; ++peer) {
    if (peer == context_.rank) continue;
    Clock::time_point heard;
    for (Transport* transport : transports_) {
      if (transport->tracks_liveness()) heard = std::max(heard, transport->last_heard(peer));
    }
    if (now - heard > 3 * liveness_interval()) silent.push_back(peer);
  }
  return silent;
}

Status ProgressEngine::deadline_failure(ActiveOp& op) {
  const OpPhase& phase = *op.phase();
  const std::string rank = "rank " + std::to_string(context_.rank);
  std::string text = op_label(op.args) + " (" + (phase.task ? phase.task->algorithm() : "?") +
                     ") made no progress for " + std::to_string(context_.config->timeout_ms()) +
                     " ms (TIDEGATE_TIMEOUT_MS) on " + rank;
  const std::vector<int> awaited = phase.context.transport->awaited_peers();
  if (!awaited.empty()) text += " waiting for " + rank_list(awaited);
  // The ranks that did not answer liveness notices are the likely cause (stopped, hung or
  // dead); an awaited rank that did answer is waiting for another one itself.
  const std::vector<int> silent = silent_peers(Clock::now());
  if (self_stall_seen_at_ > op.last_progress) {
    // This process itself did not run for a while (stopped, or starved of CPU): the peers have
    // most likely given up on it meanwhile, and their verdict is the root cause. It is on its
    // way or already here, so give it a moment to surface before reporting a timeout.
    const std::string stalled = rank + " did not run for " + seconds_text(self_stall_) +
                                " s (its process was stopped, e.g. by SIGSTOP, or starved)";
    Status peers = await_peer_verdict(Milliseconds(kPeerVerdictWaitMs));
    if (!peers.is_ok()) {
      return aborted_error(stalled +
                           ", and its peers failed the communicator meanwhile: " + peers.message());
    }
    return timeout_error(text + "; " + stalled);
  }
  if (!silent.empty()) {
    return timeout_error(text + "; " + rank_list(silent) + (silent.size() == 1 ? " has" : " have") +
                         " given no sign of life for " +
                         std::to_string(context_.config->timeout_ms()) +
                         " ms or more: stopped, hung or dead (every other rank answered)");
  }
  bool tracked = false;
  for (Transport* transport : transports_) tracked |= transport->tracks_liveness();
  if (tracked) {
    return timeout_error(text +
                         ": every rank answered liveness notices, so one has not posted this "
                         "collective (or posted another one)");
  }
  return timeout_error(text + ": " + (awaited.empty() ? "a peer" : "that peer") +
                       " is stalled or dead, or did not post this collective");
}

Status ProgressEngine::await_peer_verdict(Milliseconds budget) {
  const Deadline deadline = Deadline::after(budget);
  while (!deadline.passed()) {
    for (Transport* transport : transports_) {
      bool activity = false;
      Status st = transport->progress(Milliseconds(10), &activity);
      if (!st.is_ok()) return st;
    }
  }
  return Status::ok();
}

size_t ProgressEngine::transport_index(const Transport* transport) const {
  for (size_t i = 0; i < transports_.size(); ++i) {
    if (transports_[i] == transport) return i;
  }
  return 0;
}

Status ProgressEngine::poll_transports(const std::vector<size_t>& indexes, Milliseconds wait,
                                       bool* any) {
  for (size_t i : indexes) {
    bool activity = false;
    TG_RETURN_IF_ERROR(progress_transport(transports_[i], wait, &activity));
    if (activity) transport_activity_[i] = true;
    *any = *any || activity;
  }
  return Status::ok();
}

// The running phases wait for peers. Poll first, for up to TIDEGATE_SPIN_US, and block for
// events only when nothing moved by then: a peer's reply to a small message usually comes within
// tens of microseconds, and sleeping in the kernel for it costs a wake-up (a scheduler round
// trip) per message round, which on a busy host doubled the time of a 1 KiB allreduce. Yielding
// between polls leaves the CPU to a peer rank that shares it.
//
// A large op (above kSpinMaxOpBytes) polls only while polling pays: while the wire's next bytes
// come within the spin window (10 Gbit/s: DDP's 25 MB buckets 1.0-1.4x Gloo's step with polling,
// 0.86-1.04x without); once a spin ran out with nothing, it sleeps at once, until a sleep ends
// within the window again (1 Gbit/s: the bytes come slower than the window, and polling through
// the gaps took the CPU from the training's compute on the same cores: 0.87x Gloo's step with
// polling, 1.0x without). With phases on several transports, the block is shared between them so
// that each is looked at promptly.
Status ProgressEngine::wait_on_wire(bool poll_only) {
  std::fill(transport_activity_.begin(), transport_activity_.end(), false);
  std::vector<size_t> running;
  bool latency_bound = true;
  for (ActiveOp& op : active_) {
    OpPhase* phase = op.phase();
    if (phase == nullptr || !phase->started) continue;
    const size_t index = transport_index(phase->context.transport);
    if (std::find(running.begin(), running.end(), index) == running.end()) running.push_back(index);
    const size_t bytes = std::max(op.args.input.bytes(), op.args.output.bytes());
    if (bytes > kSpinMaxOpBytes) latency_bound = false;
  }
  if (running.empty()) return Status::ok();
  bool any = false;
  TG_RETURN_IF_ERROR(poll_transports(running, Milliseconds(0), &any));
  if (poll_only) return Status::ok();  // a task has work of its own to go on with
  const auto window = std::chrono::microseconds(spin_us_);
  const bool spin = latency_bound || large_op_spin_pays_;
  const auto spin_until = Clock::now() + (spin ? window : std::chrono::microseconds(0));
  while (!any && Clock::now() < spin_until) {
    std::this_thread::yield();
    TG_RETURN_IF_ERROR(poll_transports(running, Milliseconds(0), &any));
  }
  if (!latency_bound && spin) large_op_spin_pays_ = any;
  if (any) return Status::ok();
  const Milliseconds share(
      std::max<int64_t>(1, kMaxBlock.count() / static_cast<int64_t>(running.size())));
  const Clock::time_point slept_at = Clock::now();
  TG_RETURN_IF_ERROR(poll_transports(running, running.size() == 1 ? kMaxBlock : share, &any));
  if (!latency_bound && any && Clock::now() - slept_at < window) large_op_spin_pays_ = true;
  return Status::ok();
}

Status ProgressEngine::progress_transport(Transport* transport, Milliseconds wait, bool* activity) {
  observe_running(kMaxBlock);
  Status st = transport->progress(wait, activity);
  observe_running(wait);
  return st;
}

void ProgressEngine::observe_running(Milliseconds allowed) {
  // Between two observations the thread did bounded work or blocked for at most `allowed`: a
  // much longer gap means this process did not run.
  const Clock::time_point now = Clock::now();
  const Clock::duration gap = now - last_observed_;
  if (last_observed_ != Clock::time_point() && gap > allowed + kSelfStallGap) {
    self_stall_ = gap - allowed;
    self_stall_seen_at_ = now;
  }
  last_observed_ = now;
}

Status ProgressEngine::progress_idle() {
  // One transport blocks as before; several share the wait so each is looked at promptly.
  const Milliseconds share(
      std::max<int64_t>(1, kMaxBlock.count() / static_cast<int64_t>(transports_.size())));
  for (Transport* transport : transports_) {
    bool activity = false;
    TG_RETURN_IF_ERROR(
        progress_transport(transport, transports_.size() == 1 ? kMaxBlock : share, &activity));
  }
  return Status::ok();
}

void ProgressEngine::advance_and_wait() {
  const bool moved = advance_ops();
  complete_in_order();
  if (active_.empty()) return;
  Status st = check_deadlines(Clock::now());
  if (st.is_ok() && !moved) st = wait_on_wire(any_local_work());
  if (!st.is_ok()) fail_and_tell_peers(st);
}

void ProgressEngine::idle(std::unique_lock<std::mutex>& driver) {
  const Clock::time_point park_until = last_op_finished_ + kParkAfterOp;
  if (context_.config->caller_runs() && Clock::now() < park_until) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!queue_.empty() || unpark_) {
      unpark_ = false;
      return;
    }
    parked_ = true;
    driver.unlock();
    park_cv_.wait_until(lock, park_until, [&] { return unpark_; });
    parked_ = false;
    unpark_ = false;
    lock.unlock();
    driver.lock();
    // Time parked, or waiting for a caller that drove meanwhile, is not a stall of this process.
    last_observed_ = Clock::now();
    return;
  }
  Status st = progress_idle();
  if (!st.is_ok()) fail_and_tell_peers(st);
}

void ProgressEngine::run() {
  t_driving = this;
  std::unique_lock<std::mutex> driver(driver_mutex_);
  while (true) {
    observe_running(kMaxBlock);  // every pass blocks for at most kMaxBlock
    Status abort_reason;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      abort_reason = std::exchange(pending_abort_, Status::ok());
      const bool idle = active_.empty() && queue_.empty();
      if (abort_reason.is_ok() && (stopping_ || (idle && (draining_ || !failure_.is_ok())))) {
        thread_running_ = false;
        return;
      }
    }
    if (!abort_reason.is_ok()) {
      fail(abort_reason);
      continue;  // the next pass exits: failure_ is set and nothing is left
    }
    admit_ops();
    if (active_.empty()) {
      idle(driver);
      continue;
    }
    advance_and_wait();
  }
}

}  // namespace tidegate
