// tidegate-bench --step PROFILE: a training step replayed on a real model's gradients, to see
// how much of the communication each way of synchronising hides behind compute.
//
// The emulated trainer runs forward layer by layer (in forward order), then backward layer by
// layer (in backward order), each layer's compute a busy spin of its FLOPs' share of
// --forward-ms / --backward-ms on the trainer thread. A spin, not a sleep: real compute keeps
// the trainer's core busy, and the library's threads must not get it for free. Backward hands
// each gradient over as its layer finishes; the next forward asks for each gradient before the
// layer that uses it. Gradients are real float32 buffers, refilled per rank before each phase
// and stamped per step, averaged in place.
//
// Per mode (step_sync.h) and codec, two measured phases: with compute, and with none (the
// communication alone). A step runs from one forward's start to the next one's, so it includes
// the waits of the forward for the previous step's gradients; the reported figures are
// medians over the measured steps of the slowest rank. After each phase every rank's gradients
// must be bitwise identical (a hash, allgathered): otherwise the bench fails.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bench/tidegate_bench/step_sync.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

struct StepBenchOptions {
  std::string profile_path;
  double backward_ms = 120;
  double forward_ms = -1;           // < 0: backward_ms / 2
  std::vector<StepMode> modes;      // in the order run (noverlap first gives the speed-ups)
  std::vector<std::string> codecs;  // each a variant; empty: dense only ("none" is dense)
  int warmup = 2;  // at least 1 is run (the first step's forward has nothing to wait for)
  int iters = 5;
  std::string json_path;  // rank 0 appends one JSON line per mode and codec
};

// Collective. Rank 0 prints the table (and the JSON lines). MISMATCH when the gradients differ
// between ranks after a phase.
Status run_step_bench(tidegate_comm_t comm, int rank, int size, const StepBenchOptions& options);

}  // namespace tidegate::bench
