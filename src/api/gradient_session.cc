// Registration, readiness and the waits of a gradient session (gradient_session.h); the
// scheduler thread is in gradient_session_scheduler.cc.
#include "api/gradient_session.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "api/compressed_args.h"
#include "api/tensor_checks.h"
#include "base/wire_header.h"

namespace tidegate {

namespace {

bool is_dense_spec(const char* codec) {
  return codec == nullptr || codec[0] == '\0' || std::string(codec) == "none";
}

// The smallest power of two in [lo, hi] whose predicted allreduce time is at least `factor`
// times a tiny message's (where the per-message latency has become a small part of the cost);
// `fallback` without a plan.
int64_t plan_size(const Planner& planner, double factor, int64_t lo, int64_t hi, int64_t fallback) {
  const double tiny = planner.price_us(OpKind::kAllreduce, 8);
  if (!(tiny > 0)) return fallback;
  for (int64_t bytes = lo; bytes < hi; bytes *= 2) {
    if (planner.price_us(OpKind::kAllreduce, bytes) >= factor * tiny) return bytes;
  }
  return hi;
}

uint64_t text_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

Status GradientSession::create(Communicator* comm, const tidegate_gradient_t* gradients,
                               int64_t count, const tidegate_session_options_t* options,
                               std::unique_ptr<GradientSession>* out) {
  TG_CHECK_ARG(comm != nullptr, "communicator is NULL");
  TG_CHECK_ARG(out != nullptr, "session output pointer is NULL");
  TG_CHECK_ARG(count >= 0 && (count == 0 || gradients != nullptr),
               "gradients is NULL or count is negative");
  tidegate_session_options_t used = options != nullptr ? *options : tidegate_session_options_t{};
  if (used.op == 0) used.op = TIDEGATE_SUM;
  TG_CHECK_ARG(used.op == TIDEGATE_SUM || used.op == TIDEGATE_AVG,
               "gradient session: op must be TIDEGATE_SUM or TIDEGATE_AVG");
  TG_CHECK_ARG(used.priority == 0 || used.priority == 1 || used.priority == -1,
               "gradient session: options.priority must be 1 (priority), -1 (agreed order) or 0");
  TG_CHECK_ARG(used.fusion_bytes >= -1 && used.chunk_bytes >= -1 && used.cycle_us >= 0,
               "gradient session: fusion_bytes and chunk_bytes must be -1, 0 or a size, "
               "cycle_us >= 0");
  const Config& config = comm->config();
  if (used.priority == 0) used.priority = 1;
  if (used.fusion_bytes == 0) used.fusion_bytes = config.fusion_bytes();
  if (used.chunk_bytes == 0) used.chunk_bytes = config.chunk_bytes();
  if (used.cycle_us == 0) used.cycle_us = config.session_cycle_us();
  // Auto sizes from the plan: fuse up to where latency is an eighth of the cost, cut pieces
  // where it is about 3%. The plan's latency is the idle wire's; under a busy backward pass
  // every op costs more (threads wait for a core), so pieces are sized generously: on the
  // emulated 10 Gbit cluster 1 MiB pieces lost 15% of the step to per-op costs, 4 MiB none.
  if (used.fusion_bytes == 0) {
    used.fusion_bytes = plan_size(comm->planner(), 8.0, 64 << 10, 4 << 20, 1 << 20);
  }
  if (used.chunk_bytes == 0) {
    used.chunk_bytes = plan_size(comm->planner(), 32.0, 256 << 10, 16 << 20, 4 << 20);
  }

  std::vector<Gradient> registered(static_cast<size_t>(count));
  std::set<uint64_t> keys;
  for (int64_t i = 0; i < count; ++i) {
    const tidegate_gradient_t& g = gradients[i];
    Gradient& r = registered[static_cast<size_t>(i)];
    const std::string where =
        "gradient session: gradient " + std::to_string(i) + " (key " + std::to_string(g.key) + ")";
    TG_CHECK_ARG(keys.insert(g.key).second, where + ": the key is registered twice");
    if (g.tensor.memory != TIDEGATE_MEMORY_HOST) {
      return Status(TIDEGATE_ERR_UNSUPPORTED,
                    where + ": only host memory is supported by the gradient session so far");
    }
    r.info.key = g.key;
    r.info.priority = g.priority;
    r.info.compressed = !is_dense_spec(g.codec);
    if (r.info.compressed) {
      tidegate_compression_t compression{};
      compression.codec = g.codec;
      compression.key = g.key;
      compression.error_feedback = g.error_feedback;
      compression.allowed = g.allowed;
      Status st =
          compressed_allreduce_args(&g.tensor, &g.tensor, used.op, &compression, &comm->codecs(),
                                    comm->default_allowed_codecs(), &r.compressed);
      if (!st.is_ok()) return Status(st.code(), where + ": " + st.message());
      r.view = r.compressed.output;
    } else {
      CollectiveArgs args;
      Status st = allreduce_args(&g.tensor, &g.tensor, used.op, &args);
      if (!st.is_ok()) return Status(st.code(), where + ": " + st.message());
      r.view = args.output;
    }
    r.info.count = r.view.count;
    r.info.dtype = r.view.dtype;
  }

  ScheduleKnobs knobs;
  knobs.fusion_bytes = used.fusion_bytes;
  knobs.chunk_bytes = used.chunk_bytes;
  // A batch is two pieces: each negotiation round must move enough to keep the wire busy
  // until the next round's result (a round needs every rank's scheduler thread, which a busy
  // backward pass may delay), while a gradient agreed late still waits for at most two batches.
  knobs.batch_bytes = 2 * (used.chunk_bytes > 0 ? used.chunk_bytes : (4 << 20));
  knobs.by_priority = used.priority > 0;
  std::unique_ptr<GradientSession> session(
      new GradientSession(comm, std::move(registered), used, knobs));
  TG_RETURN_IF_ERROR(session->check_registration_matches());
  session->thread_ = std::thread([s = session.get()] { s->run(); });
  *out = std::move(session);
  return Status::ok();
}

GradientSession::GradientSession(Communicator* comm, std::vector<Gradient> gradients,
                                 tidegate_session_options_t options, ScheduleKnobs knobs)
    : comm_(comm),
      options_(options),
      schedule_(
          [&] {
            std::vector<SessionGradient> infos;
            for (const Gradient& g : gradients) infos.push_back(g.info);
            return infos;
          }(),
          knobs),
      gradients_(std::move(gradients)) {}

GradientSession::~GradientSession() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Ops still in flight write into the caller's gradients and the fusion buffers: wait for
  // them, under the deadline; past it, abort the communicator so that they end.
  std::unique_lock<std::mutex> lock(mutex_);
  const Milliseconds deadline(comm_->config().timeout_ms());
  if (!changed_.wait_for(lock, deadline, [this] { return outstanding_ops_ == 0; })) {
    lock.unlock();
    comm_->abort("gradient session destroyed with ops still in flight after " +
                 std::to_string(deadline.count()) + " ms");
    lock.lock();
    changed_.wait(lock, [this] { return outstanding_ops_ == 0; });
  }
}

// Every rank must register the same gradients: one allreduce (int64 MIN) of each field's hash
// and its complement gives every rank the smallest and largest value of every field, so a
// difference is found, and named, on every rank alike.
Status GradientSession::check_registration_matches() {
  constexpr int kFields = 5;
  static const char* const kNames[kFields] = {"key", "count", "dtype", "priority", "codec"};
  const size_t n = gradients_.size();
  std::vector<int64_t> table(2 * (1 + kFields * n));
  auto put = [&](size_t slot, uint64_t value) {
    table[2 * slot] = static_cast<int64_t>(value);
    table[2 * slot + 1] = static_cast<int64_t>(~value);
  };
  put(0, n);
  for (size_t i = 0; i < n; ++i) {
    const Gradient& g = gradients_[i];
    std::string codec = "none";
    if (g.info.compressed) {
      const CompressionArgs& c = g.compressed.compression;
      codec = c.auto_codec ? "auto" : c.codec->spec();
      codec += "/" + c.algorithm + (c.error_feedback ? "/ef" : "");
      for (const auto& allowed : c.allowed) codec += ";" + allowed->spec();
    }
    const uint64_t fields[kFields] = {
        g.info.key, static_cast<uint64_t>(g.info.count), static_cast<uint64_t>(g.info.dtype),
        static_cast<uint64_t>(static_cast<int64_t>(g.info.priority)), text_hash(codec)};
    for (int f = 0; f < kFields; ++f) put(1 + kFields * i + static_cast<size_t>(f), fields[f]);
  }
  // A rank with fewer gradients sends a shorter table: the count goes first in its own op so
  // the tables themselves always have equal lengths.
  std::vector<int64_t> head(table.begin(), table.begin() + 2);
  auto reduce_min = [&](std::vector<int64_t>* values) {
    std::shared_ptr<Request> request;
    TG_RETURN_IF_ERROR(
        comm_->post(in_place_allreduce(values->data(), static_cast<int64_t>(values->size()),
                                       TIDEGATE_INT64, TIDEGATE_MIN),
                    &request));
    return request->wait(Deadline(Clock::time_point::max()));
  };
  TG_RETURN_IF_ERROR(reduce_min(&head));
  const std::string me = "rank " + std::to_string(comm_->rank());
  if (static_cast<uint64_t>(head[0]) != ~static_cast<uint64_t>(head[1])) {
    return mismatch_error("gradient session: ranks register different numbers of gradients (" + me +
                          " registers " + std::to_string(n) +
                          "); every rank must register the same gradients");
  }
  TG_RETURN_IF_ERROR(reduce_min(&table));
  for (size_t i = 0; i < n; ++i) {
    for (int f = 0; f < kFields; ++f) {
      const size_t slot = 1 + kFields * i + static_cast<size_t>(f);
      if (static_cast<uint64_t>(table[2 * slot]) != ~static_cast<uint64_t>(table[2 * slot + 1])) {
        return mismatch_error("gradient session: gradient " + std::to_string(i) + " (key " +
                              std::to_string(gradients_[i].info.key) + " on " + me +
                              ") differs between ranks in field '" + kNames[f] +
                              "'; every rank must register the same gradients in the same order");
      }
    }
  }
  return Status::ok();
}

CollectiveArgs GradientSession::in_place_allreduce(void* data, int64_t count,
                                                   tidegate_dtype_t dtype,
                                                   tidegate_reduce_op_t op) {
  CollectiveArgs args;
  args.kind = OpKind::kAllreduce;
  args.reduce_op = op;
  args.input.data = data;
  args.input.count = count;
  args.input.dtype = dtype;
  args.output = args.input;
  return args;
}

size_t GradientSession::index_of(uint64_t key, Status* status) const {
  for (size_t i = 0; i < gradients_.size(); ++i) {
    if (gradients_[i].info.key == key) return i;
  }
  *status = invalid_argument("gradient session: key " + std::to_string(key) + " is not registered");
  return gradients_.size();
}

Status GradientSession::ready(uint64_t key) {
  Status status;
  const size_t i = index_of(key, &status);
  TG_RETURN_IF_ERROR(status);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TG_RETURN_IF_ERROR(failure_);
    Gradient& g = gradients_[i];
    if (g.marked_step == step_) {
      return invalid_argument("gradient session: key " + std::to_string(key) +
                              " was marked ready twice in step " + std::to_string(step_) +
                              " (a step ends when every registered gradient is synchronised)");
    }
    g.marked_step = step_;
    ++marked_;
    ++ready_version_;
  }
  changed_.notify_all();
  return Status::ok();
}

Status GradientSession::wait_until(int64_t timeout_ms, const std::function<bool()>& done,
                                   const std::string& what) {
  const int64_t ms = timeout_ms >= 0 ? timeout_ms : comm_->config().timeout_ms();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, Milliseconds(ms), [&] { return done() || !failure_.is_ok(); });
  if (!failure_.is_ok()) return failure_;  // once failed, every wait says why
  if (done()) return Status::ok();
  return timeout_error("gradient session: " + what + " did not finish within " +
                       std::to_string(ms) + " ms");
}

Status GradientSession::wait(uint64_t key, int64_t timeout_ms) {
  Status status;
  const size_t i = index_of(key, &status);
  TG_RETURN_IF_ERROR(status);
  const Gradient& g = gradients_[i];
  return wait_until(
      timeout_ms, [&] { return g.done_step == g.marked_step; },
      "gradient key " + std::to_string(key));
}

Status GradientSession::wait_all(int64_t timeout_ms) {
  const int64_t step = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    return step_;
  }();
  return wait_until(
      timeout_ms, [&] { return step_ > step || done_ == marked_; },
      "the gradients marked ready in step " + std::to_string(step));
}

Status GradientSession::step(tidegate_session_stats_t* stats) {
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TG_RETURN_IF_ERROR(failure_);
    step = step_;
    // The session moves to the next step by itself once the last gradient is synchronised:
    // nothing marked yet means the caller's step is the one that just finished.
    if (marked_ == 0 && steps_finished_ > 0) step = step_ - 1;
    if (step == step_ && marked_ < gradients_.size() && !gradients_.empty()) {
      std::string keys;
      int listed = 0;
      for (const Gradient& g : gradients_) {
        if (g.marked_step == step_ || listed == 8) continue;
        keys += std::string(listed++ ? ", " : "") + std::to_string(g.info.key);
      }
      return invalid_argument("gradient session: step " + std::to_string(step) + " ends with " +
                              std::to_string(gradients_.size() - marked_) +
                              " gradients never marked ready on rank " +
                              std::to_string(comm_->rank()) + " (keys " + keys +
                              "); mark every registered gradient once per step");
    }
  }
  // Twice the deadline: a gradient some ranks never mark fails the step after one deadline
  // (and a negotiation round), and that named error is what the caller should see.
  TG_RETURN_IF_ERROR(wait_until(
      2 * comm_->config().timeout_ms() + 1000, [&] { return step_ > step || gradients_.empty(); },
      "step " + std::to_string(step)));
  if (stats != nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats->steps = steps_finished_;
    stats->ops = last_.ops;
    stats->fused_ops = last_.fused_ops;
    stats->chunk_ops = last_.chunk_ops;
    stats->cycles = last_.cycles;
    stats->comm_ms =
        std::chrono::duration<double, std::milli>(last_.last_done - last_.first_post).count();
    stats->bytes_sent = last_.bytes_sent;
  }
  return Status::ok();
}

void GradientSession::fail(const Status& status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.is_ok()) failure_ = status;
  changed_.notify_all();  // under the lock, as in pieces_done: the destructor may be waiting
}

}  // namespace tidegate
