// What tidegate-bench --step prints (rank 0): a table per codec, one row per mode, and one JSON
// line per row with the timeline of one measured step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/tidegate_bench/step_sync.h"

namespace tidegate::bench {

struct StepRunInfo {
  std::string model, profile;
  int ranks = 0;
  double backward_ms = 0, forward_ms = 0;
  int warmup = 0, iters = 0;
  size_t tensors = 0;
  int64_t bytes = 0;
  std::string first_name;  // the gradient the next forward needs first
  int64_t first_bytes = 0;
};

// One step of rank 0, in ms from its forward's start: its gradients' units were handed over
// (ready) during backward and finished (done) possibly during the next forward.
struct StepTimeline {
  double forward_end = 0, backward_end = 0, step_end = 0, next_forward_end = 0;
  std::vector<SyncUnit> units;
};

struct StepRow {
  std::string mode, codec;
  double step_ms = 0;         // median step, with compute
  double compute_ms = 0;      // median forward + backward compute of those steps
  double comm_ms = 0;         // median step of the same mode with no compute
  double first_ms = 0;        // first-needed gradient: ready to done (median)
  double first_alone_ms = 0;  // its allreduce alone (median)
  double speedup = 0;         // noverlap's step over this one (0: noverlap not run)
  int64_t ops = 0;            // collectives per step
  bool session = false;
  SessionFigures figures;
  StepTimeline timeline;

  double ideal_ms() const { return compute_ms > comm_ms ? compute_ms : comm_ms; }
  double exposed_ms() const { return step_ms - compute_ms; }
};

void print_step_header(const StepRunInfo& info, const std::string& codec);
void print_step_rows(const StepRunInfo& info, const std::vector<StepRow>& rows);
// Appends one JSON line per row to `path`.
Status append_step_json(const std::string& path, const StepRunInfo& info,
                        const std::vector<StepRow>& rows);

}  // namespace tidegate::bench
