// tidegate-bench --step's session modes: tidegate's gradient session, driven as a trainer
// would drive it (ready per gradient from backward, wait per gradient from the next forward),
// and the dispatch of every mode.
#include <cstring>

#include "bench/tidegate_bench/step_sync.h"
#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {

namespace {

class SessionSync : public GradientSync {
 public:
  explicit SessionSync(const SyncSetup& s) : s_(s) {
    const StepWorkload& w = *s.workload;
    for (size_t t = 0; t < w.tensors.size(); ++t) {
      units_.push_back(
          {w.tensors[t].name, w.tensors[t].numel * static_cast<int64_t>(sizeof(float)), -1, -1});
      unit_of_.push_back(t);
    }
  }
  ~SessionSync() override { (void)tidegate_session_destroy(session_); }

  Status create(bool fifo) {
    const StepWorkload& w = *s_.workload;
    const bool dense = dense_codec(s_.codec);
    std::vector<tidegate_gradient_t> gradients(w.tensors.size());
    for (size_t t = 0; t < w.tensors.size(); ++t) {
      tidegate_gradient_t& g = gradients[t];
      std::memset(&g, 0, sizeof g);
      g.key = s_.key_base + t;
      g.tensor =
          tidegate_host_tensor(s_.gradients + w.offsets[t], w.tensors[t].numel, TIDEGATE_FLOAT32);
      g.priority = static_cast<int>(w.tensors[t].forward_index);  // the next forward's order
      g.codec = dense ? nullptr : s_.codec.c_str();
      g.error_feedback = dense ? 0 : 1;
    }
    tidegate_session_options_t options;
    std::memset(&options, 0, sizeof options);  // 0: every knob at its default
    options.op = TIDEGATE_AVG;
    options.priority = fifo ? -1 : 0;
    TG_RETURN_IF_ERROR(from_tidegate(
        tidegate_session_create(s_.comm, gradients.data(), static_cast<int64_t>(gradients.size()),
                                &options, &session_),
        "tidegate_session_create"));
    tidegate_session_options_t used;
    std::memset(&used, 0, sizeof used);
    TG_RETURN_IF_ERROR(from_tidegate(tidegate_session_options_used(session_, &used),
                                     "tidegate_session_options_used"));
    figures_.fusion_bytes = used.fusion_bytes;
    figures_.chunk_bytes = used.chunk_bytes;
    return Status::ok();
  }

  Status produced(size_t t) override {
    units_[t].ready = now_s();
    units_[t].done = -1;
    step_open_ = true;
    return from_tidegate(tidegate_session_ready(session_, s_.key_base + t), units_[t].name.c_str());
  }

  Status backward_done() override { return Status::ok(); }

  Status needed(size_t t) override {
    if (units_[t].ready < 0 || units_[t].done >= 0) return Status::ok();
    TG_RETURN_IF_ERROR(from_tidegate(tidegate_session_wait(session_, s_.key_base + t, -1),
                                     units_[t].name.c_str()));
    units_[t].done = now_s();
    return Status::ok();
  }

  // Every gradient has been waited for: the step boundary returns at once, with the figures.
  Status forward_done() override {
    if (!step_open_) return Status::ok();
    step_open_ = false;
    tidegate_session_stats_t stats;
    std::memset(&stats, 0, sizeof stats);
    TG_RETURN_IF_ERROR(
        from_tidegate(tidegate_session_step(session_, &stats), "tidegate_session_step"));
    figures_.ops = stats.ops;
    figures_.fused_ops = stats.fused_ops;
    figures_.chunk_ops = stats.chunk_ops;
    figures_.cycles = stats.cycles;
    return Status::ok();
  }

  // A zero timeout makes the wait a test: TIMEOUT means "not yet".
  Status poll() override {
    for (size_t t = 0; t < units_.size(); ++t) {
      if (units_[t].ready < 0 || units_[t].done >= 0) continue;
      const tidegate_status_t code = tidegate_session_wait(session_, s_.key_base + t, 0);
      if (code == TIDEGATE_OK) {
        units_[t].done = now_s();
      } else if (code != TIDEGATE_ERR_TIMEOUT) {
        return from_tidegate(code, units_[t].name.c_str());
      }
    }
    return Status::ok();
  }

  SessionFigures session_figures() const override { return figures_; }

 private:
  SyncSetup s_;
  tidegate_session_t session_ = nullptr;
  bool step_open_ = false;  // gradients marked since the last step boundary
  SessionFigures figures_;
};

}  // namespace

const char* step_mode_name(StepMode mode) {
  switch (mode) {
    case StepMode::kNoOverlap:
      return "noverlap";
    case StepMode::kDdp:
      return "ddp";
    case StepMode::kSession:
      return "session";
    case StepMode::kSessionFifo:
      return "session-fifo";
  }
  return "?";
}

Status parse_step_modes(const std::string& text, std::vector<StepMode>* modes) {
  const StepMode all[] = {StepMode::kNoOverlap, StepMode::kDdp, StepMode::kSession,
                          StepMode::kSessionFifo};
  std::vector<StepMode> list;
  if (text == "all") {
    list.assign(std::begin(all), std::end(all));
  } else {
    for (size_t start = 0; start <= text.size();) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      const std::string name = text.substr(start, comma - start);
      bool found = false;
      for (StepMode m : all) {
        if (name == step_mode_name(m)) {
          list.push_back(m);
          found = true;
        }
      }
      if (!found) {
        return config_error("--step-modes: '" + name +
                            "' is not one of noverlap, ddp, session, session-fifo, all");
      }
      start = comma + 1;
    }
  }
  *modes = list;
  return Status::ok();
}

Status make_gradient_sync(StepMode mode, const SyncSetup& setup,
                          std::unique_ptr<GradientSync>* sync) {
  if (mode == StepMode::kNoOverlap || mode == StepMode::kDdp) {
    return make_baseline_sync(mode, setup, sync);
  }
  auto session = std::make_unique<SessionSync>(setup);
  TG_RETURN_IF_ERROR(session->create(mode == StepMode::kSessionFifo));
  *sync = std::move(session);
  return Status::ok();
}

}  // namespace tidegate::bench
