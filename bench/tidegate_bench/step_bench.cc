#include "bench/tidegate_bench/step_bench.h"

#include <cstdio>
#include <memory>
#include <thread>

#include "bench/tidegate_bench/element_io.h"
#include "bench/tidegate_bench/step_report.h"
#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {

namespace {

// Timeline steps poll the units this often while the trainer spins.
constexpr double kPollSeconds = 50e-6;
constexpr double kPollLimitSeconds = 10;

// Compression and session keys: one range per mode, far from the small keys users pick.
uint64_t key_base(StepMode mode) { return (static_cast<uint64_t>(mode) + 1) << 40; }
constexpr uint64_t kAloneKey = uint64_t{15} << 40;

// Distinct values per rank (so that a skipped op shows), small and finite (so that averaging
// and every codec take them).
void fill_gradients(std::vector<float>* g, int rank) {
  const uint32_t salt = static_cast<uint32_t>(rank) * 40503u;
  for (size_t i = 0; i < g->size(); ++i) {
    const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + salt;
    (*g)[i] = static_cast<float>(static_cast<int>(h >> 21) - 1024) / 1024.0f;
  }
}

// MISMATCH naming the ranks whose gradients differ from rank 0's.
Status check_identical(tidegate_comm_t comm, int size, const std::vector<float>& g,
                       const std::string& what) {
  int64_t mine = static_cast<int64_t>(fnv1a(g.data(), g.size() * sizeof(float)));
  std::vector<int64_t> all(static_cast<size_t>(size));
  tidegate_tensor_t in = tidegate_host_tensor(&mine, 1, TIDEGATE_INT64);
  tidegate_tensor_t out = tidegate_host_tensor(all.data(), size, TIDEGATE_INT64);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_allgather(comm, &in, &out), "allgather of hashes"));
  std::string differ;
  for (int r = 1; r < size; ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) differ += " " + std::to_string(r);
  }
  if (differ.empty()) return Status::ok();
  return mismatch_error("--step " + what + ": gradients of rank(s)" + differ +
                        " differ from rank 0's after the run");
}

// What one phase recorded on this rank.
struct PhaseRecord {
  std::vector<double> step_s, compute_s, first_s;  // per measured step
  StepTimeline timeline;                           // the last measured step
  int64_t ops = 0;
  SessionFigures figures;
};

// The emulated trainer of one phase.
class Trainer {
 public:
  Trainer(const StepWorkload& w, GradientSync* sync, std::vector<float>* g, int rank, bool compute)
      : w_(w), sync_(sync), g_(g), rank_(rank), compute_(compute), produced_at_(w.tensors.size()) {}

  Status forward(bool poll, double* spent) {
    target_ = now_s();
    for (const StepLayer& layer : w_.layers) {
      for (size_t t : layer.tensors) {
        if (poll) TG_RETURN_IF_ERROR(sync_call([&] { return poll_until_done(t); }));
        TG_RETURN_IF_ERROR(sync_call([&] { return sync_->needed(t); }));
      }
      TG_RETURN_IF_ERROR(spin(layer.forward_s, poll, spent));
    }
    return sync_call([&] { return sync_->forward_done(); });
  }

  // A layer's compute comes before its first gradient; each gradient is stamped with values
  // of this step and rank as it is produced, so that every step synchronises new data.
  Status backward(int step, bool poll, double* spent, double* compute_end) {
    std::vector<bool> started(w_.layers.size(), false);
    for (size_t t = 0; t < w_.tensors.size(); ++t) {
      const size_t layer = w_.layer_of[t];
      if (!started[layer]) {
        started[layer] = true;
        TG_RETURN_IF_ERROR(spin(w_.layers[layer].backward_s, poll, spent));
      }
      stamp(t, step);
      produced_at_[t] = now_s();
      TG_RETURN_IF_ERROR(sync_call([&] { return sync_->produced(t); }));
    }
    *compute_end = now_s();
    return sync_call([&] { return sync_->backward_done(); });
  }

  // The first-needed gradient of the step before: from produced to done.
  double first_latency() const {
    const SyncUnit& u = sync_->units()[sync_->unit_of(w_.first_needed)];
    return u.done - produced_at_[w_.first_needed];
  }

 private:
  // Busy work to a schedule: each spin ends `seconds` after the previous one was due to end
  // (plus the time spent in sync calls since), so that a spin the machine preempted past its
  // end is made up by the next layers rather than added to the step.
  Status spin(double seconds, bool poll, double* spent) {
    if (!compute_ || seconds <= 0) return Status::ok();
    target_ += seconds;
    const double start = now_s();
    double next_poll = start, t = start;
    while ((t = now_s()) < target_) {
      if (poll && t >= next_poll) {
        TG_RETURN_IF_ERROR(sync_->poll());
        next_poll = t + kPollSeconds;
      }
    }
    *spent += t - start;
    return Status::ok();
  }

  // The timeline's wait for tensor t: polls every unit until t's is done, so that units which
  // finish meanwhile get their own done time, not the time the forward reached them. Sleeps
  // between polls to leave the core to the library, as a blocking wait does; after
  // kPollLimitSeconds the blocking wait (with the library's deadline) takes over.
  Status poll_until_done(size_t t) {
    const SyncUnit& unit = sync_->units()[sync_->unit_of(t)];
    const double limit = now_s() + kPollLimitSeconds;
    while (unit.ready >= 0 && unit.done < 0 && now_s() < limit) {
      TG_RETURN_IF_ERROR(sync_->poll());
      if (unit.done < 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return Status::ok();
  }

  // Time in the sync (waiting, posting) is not compute: it moves the compute schedule on.
  template <typename Call>
  Status sync_call(const Call& call) {
    const double start = now_s();
    Status st = call();
    target_ += now_s() - start;
    return st;
  }

  void stamp(size_t t, int step) {
    const int64_t n = w_.tensors[t].numel;
    if (n == 0) return;
    float* p = g_->data() + w_.offsets[t];
    const float v = static_cast<float>(rank_ + 1) * 0.25f + static_cast<float>(step % 7) * 0.125f;
    p[0] = v;
    p[n / 2] = -v;
    p[n - 1] = v * 0.5f;
  }

  const StepWorkload& w_;
  GradientSync* sync_;
  std::vector<float>* g_;
  int rank_;
  bool compute_;
  std::vector<double> produced_at_;
  double target_ = 0;  // when the compute scheduled so far is due to end
};

StepTimeline relative_timeline(const std::vector<SyncUnit>& units, double start) {
  StepTimeline tl;
  for (SyncUnit u : units) {
    u.ready = (u.ready - start) * 1e3;
    u.done = (u.done - start) * 1e3;
    tl.units.push_back(u);
  }
  return tl;
}

// Runs warmup + iters steps and one more forward (which waits for the last step's gradients).
// The last measured step is the timeline's: its units are polled while the trainer spins.
Status run_phase(const SyncSetup& setup, StepMode mode, int warmup, int iters, bool compute,
                 std::vector<float>* g, int rank, PhaseRecord* rec) {
  std::unique_ptr<GradientSync> sync;
  TG_RETURN_IF_ERROR(make_gradient_sync(mode, setup, &sync));
  Trainer trainer(*setup.workload, sync.get(), g, rank, compute);
  TG_RETURN_IF_ERROR(from_tidegate(tidegate_barrier(setup.comm), "tidegate_barrier"));
  const int total = warmup + iters, last = total - 1;
  std::vector<double> starts(static_cast<size_t>(total) + 1);
  double forward_end = 0, backward_end = 0, spent = 0, ignored = 0;
  for (int s = 0; s <= total; ++s) {
    starts[static_cast<size_t>(s)] = now_s();
    if (s > warmup) rec->compute_s.push_back(spent);
    spent = 0;
    TG_RETURN_IF_ERROR(trainer.forward(s == total, &spent));
    if (s > warmup) rec->first_s.push_back(trainer.first_latency());
    if (s == total) break;
    if (s == last) forward_end = now_s();
    TG_RETURN_IF_ERROR(
        trainer.backward(s, s == last, &spent, s == last ? &backward_end : &ignored));
  }
  const double start = starts[static_cast<size_t>(last)];
  rec->timeline = relative_timeline(sync->units(), start);
  rec->timeline.forward_end = (forward_end - start) * 1e3;
  rec->timeline.backward_end = (backward_end - start) * 1e3;
  rec->timeline.step_end = (starts[static_cast<size_t>(total)] - start) * 1e3;
  rec->timeline.next_forward_end = (now_s() - start) * 1e3;
  for (int s = warmup; s < total; ++s) {
    rec->step_s.push_back(starts[static_cast<size_t>(s) + 1] - starts[static_cast<size_t>(s)]);
  }
  rec->figures = sync->session_figures();
  rec->ops = mode == StepMode::kSession || mode == StepMode::kSessionFifo
                 ? rec->figures.ops
                 : static_cast<int64_t>(sync->units().size());
  return Status::ok();
}

double ms(double seconds) { return seconds * 1e3; }

// The first-needed gradient's allreduce alone, dense or with the codec: the floor its
// ready-to-done time in a step is compared with.
Status time_alone(tidegate_comm_t comm, const StepWorkload& w, const std::string& codec, int warmup,
                  int iters, double* median_s) {
  std::vector<float> g(static_cast<size_t>(w.tensors[w.first_needed].numel));
  fill_gradients(&g, 0);
  tidegate_tensor_t t =
      tidegate_host_tensor(g.data(), static_cast<int64_t>(g.size()), TIDEGATE_FLOAT32);
  const tidegate_compression_t c = step_compression(codec, kAloneKey);
  TimedLoop loop;
  loop.barrier = [&] { return from_tidegate(tidegate_barrier(comm), "tidegate_barrier"); };
  loop.operation = [&] {
    if (dense_codec(codec)) {
      return from_tidegate(tidegate_allreduce(comm, &t, &t, TIDEGATE_AVG), "allreduce alone");
    }
    return from_tidegate(tidegate_compressed_allreduce(comm, &t, &t, TIDEGATE_AVG, &c),
                         "compressed allreduce alone");
  };
  std::vector<double> seconds;
  TG_RETURN_IF_ERROR(run_timed(loop, warmup, iters < 5 ? 5 : iters, &seconds));
  if (!dense_codec(codec)) {
    TG_RETURN_IF_ERROR(from_tidegate(tidegate_ef_state_reset(comm), "tidegate_ef_state_reset"));
  }
  return slowest_rank_median(comm, seconds, median_s);
}

struct ModeContext {
  tidegate_comm_t comm;
  int rank, size;
  const StepWorkload* workload;
  const StepBenchOptions* options;
  std::vector<float>* gradients;
};

// Both phases of one mode: with compute, then the communication alone.
Status run_mode(const ModeContext& m, StepMode mode, const std::string& codec, StepRow* row) {
  row->mode = step_mode_name(mode);
  row->codec = dense_codec(codec) ? "dense" : codec;
  row->session = mode == StepMode::kSession || mode == StepMode::kSessionFifo;
  SyncSetup setup{m.comm, m.workload, m.gradients->data(), codec, key_base(mode)};
  for (bool compute : {true, false}) {
    const std::string what = row->mode + " " + row->codec + (compute ? "" : " (no compute)");
    fill_gradients(m.gradients, m.rank);
    PhaseRecord rec;
    TG_RETURN_IF_ERROR(run_phase(setup, mode, m.options->warmup, m.options->iters, compute,
                                 m.gradients, m.rank, &rec)
                           .with_context(what + ": "));
    TG_RETURN_IF_ERROR(check_identical(m.comm, m.size, *m.gradients, what));
    if (!dense_codec(codec)) {
      TG_RETURN_IF_ERROR(from_tidegate(tidegate_ef_state_reset(m.comm), "tidegate_ef_state_reset"));
    }
    double step = 0;
    TG_RETURN_IF_ERROR(slowest_rank_median(m.comm, rec.step_s, &step));
    if (!compute) {
      row->comm_ms = ms(step);
      continue;
    }
    double compute_s = 0, first = 0;
    TG_RETURN_IF_ERROR(slowest_rank_median(m.comm, rec.compute_s, &compute_s));
    TG_RETURN_IF_ERROR(slowest_rank_median(m.comm, rec.first_s, &first));
    row->step_ms = ms(step);
    row->compute_ms = ms(compute_s);
    row->first_ms = ms(first);
    row->ops = rec.ops;
    row->figures = rec.figures;
    row->timeline = std::move(rec.timeline);
  }
  return Status::ok();
}

}  // namespace

Status run_step_bench(tidegate_comm_t comm, int rank, int size, const StepBenchOptions& options) {
  // A step's time includes its forward waiting for the step before: the first step has none
  // to wait for, so it is always a warm-up.
  StepBenchOptions o = options;
  if (o.warmup < 1) o.warmup = 1;
  StepProfile profile;
  TG_RETURN_IF_ERROR(load_step_profile(o.profile_path, &profile));
  const double forward_ms = o.forward_ms >= 0 ? o.forward_ms : o.backward_ms / 2;
  const StepWorkload w = make_step_workload(profile, o.backward_ms, forward_ms);
  const ProfileTensor& first = w.tensors[w.first_needed];
  StepRunInfo info{profile.model,     o.profile_path, size,           o.backward_ms,
                   forward_ms,        o.warmup,       o.iters,        w.tensors.size(),
                   w.total_numel * 4, first.name,     first.numel * 4};
  std::vector<float> gradients(static_cast<size_t>(w.total_numel));
  const ModeContext context{comm, rank, size, &w, &o, &gradients};
  const std::vector<std::string> codecs =
      o.codecs.empty() ? std::vector<std::string>{"none"} : o.codecs;
  for (const std::string& codec : codecs) {
    if (rank == 0) print_step_header(info, dense_codec(codec) ? "dense" : codec);
    double alone = 0;
    TG_RETURN_IF_ERROR(time_alone(comm, w, codec, o.warmup, o.iters, &alone));
    std::vector<StepRow> rows;
    double noverlap_ms = 0;
    for (StepMode mode : o.modes) {
      StepRow row;
      TG_RETURN_IF_ERROR(run_mode(context, mode, codec, &row));
      row.first_alone_ms = ms(alone);
      if (mode == StepMode::kNoOverlap) noverlap_ms = row.step_ms;
      rows.push_back(std::move(row));
    }
    for (StepRow& row : rows) row.speedup = noverlap_ms > 0 ? noverlap_ms / row.step_ms : 0;
    if (rank == 0) {
      print_step_rows(info, rows);
      if (!o.json_path.empty()) TG_RETURN_IF_ERROR(append_step_json(o.json_path, info, rows));
    }
  }
  return Status::ok();
}

}  // namespace tidegate::bench
