// The soak's compressed allreduces: every codec, on several algorithms, with error feedback.
#pragma once

#include <random>

#include "soak_rank.h"

namespace tidegate::soak {

// One compressed allreduce (SUM, float32, error feedback on) of a codec, algorithm and size
// drawn from `draw` (the same on every rank), then checked two ways:
//  - nothing is lost: the output plus every rank's residuals (flushed into a zero tensor and
//    summed with a dense allreduce) equals the exact sum of the inputs, within float32 rounding
//    (every codec but signsgd, whose output is a vote, not a sum);
//  - every rank holds the same bits (a hash of the output, allgathered).
// Flushing after every op keeps the residuals from growing across ops, so a codec that lost or
// double-counted part of a gradient shows in the op that did it.
void run_compressed(SoakRank& r, std::mt19937_64& draw);

}  // namespace tidegate::soak
