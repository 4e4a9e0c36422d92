// The ways tidegate-bench --step synchronises a model's gradients, behind one interface the
// emulated trainer drives: backward announces each gradient as it is produced, the next forward
// asks for each gradient before the layer that uses it.
//
//   noverlap      after backward, one allreduce of every gradient (the flat buffer; compressed:
//                 one compressed allreduce per tensor, all posted after backward)
//   ddp           PyTorch DDP's buckets: 25 MB in backward order (the first 1 MB), each
//                 allreduced as soon as its last gradient is produced, in bucket order, no
//                 priority; backward ends by waiting for every bucket (compressed: one
//                 compressed allreduce per bucket, keyed by the bucket)
//   session       tidegate's gradient session, default knobs: priority by forward order,
//                 chunks, fusion; the next forward waits per tensor
//   session-fifo  the same with priority = -1 (the agreed ready order)
//
// Every op averages (TIDEGATE_AVG), in place, so values stay bounded over many steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/tidegate_bench/step_profile.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

enum class StepMode { kNoOverlap, kDdp, kSession, kSessionFifo };

const char* step_mode_name(StepMode mode);
// "all" or a comma-separated list of the names above. CONFIG error naming the bad one.
Status parse_step_modes(const std::string& text, std::vector<StepMode>* modes);

// "" and "none" stand for dense (no codec).
inline bool dense_codec(const std::string& codec) { return codec.empty() || codec == "none"; }

// Seconds on the steady clock, the one time base of a phase's records.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One op's worth of gradients (a tensor, a bucket or the whole model) with this step's times:
// when it was handed to tidegate and when this rank saw it finished (-1: not yet).
struct SyncUnit {
  std::string name;
  int64_t bytes = 0;
  double ready = -1;
  double done = -1;
};

// What a session reported for its last finished step (zero for the other modes).
struct SessionFigures {
  int64_t ops = 0, fused_ops = 0, chunk_ops = 0, cycles = 0;
  int64_t fusion_bytes = 0, chunk_bytes = 0;  // the knobs it ran with
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Backward has produced tensor t (its buffer holds this step's gradient).
  virtual Status produced(size_t t) = 0;
  // Backward is over (noverlap: the whole synchronisation; ddp: waits for every bucket).
  virtual Status backward_done() = 0;
  // The next forward is about to use tensor t: returns once its buffer holds the result.
  virtual Status needed(size_t t) = 0;
  // The next forward has had every tensor: the previous step is over everywhere.
  virtual Status forward_done() { return Status::ok(); }
  // Marks units that have finished since the last call; never blocks (timeline steps only).
  virtual Status poll() = 0;

  // The units, with the times of the last step that reached them.
  const std::vector<SyncUnit>& units() const { return units_; }
  // The unit that carries tensor t.
  size_t unit_of(size_t t) const { return unit_of_[t]; }
  virtual SessionFigures session_figures() const { return {}; }

 protected:
  std::vector<SyncUnit> units_;
  std::vector<size_t> unit_of_;
};

struct SyncSetup {
  tidegate_comm_t comm = nullptr;
  const StepWorkload* workload = nullptr;
  float* gradients = nullptr;  // the flat buffer (workload->total_numel floats)
  std::string codec;           // "" or "none": dense; else a codec spec (error feedback on)
  uint64_t key_base = 0;       // compression / session keys are key_base + index
};

// Collective for the session modes (tidegate_session_create).
Status make_gradient_sync(StepMode mode, const SyncSetup& setup,
                          std::unique_ptr<GradientSync>* sync);
// Its half for noverlap and ddp (step_sync_baselines.cc).
Status make_baseline_sync(StepMode mode, const SyncSetup& setup,
                          std::unique_ptr<GradientSync>* sync);

// The gradients of each DDP bucket (indices into the backward-ordered list): PyTorch's
// assignment, a bucket closed once it holds at least its cap (the first cap, then the rest).
std::vector<std::vector<size_t>> ddp_buckets(const StepWorkload& w, int64_t first_cap_bytes,
                                             int64_t cap_bytes);

// The compressed allreduce's options for a codec spec and key (error feedback on).
tidegate_compression_t step_compression(const std::string& codec, uint64_t key);

}  // namespace tidegate::bench
