// tidegate-bench --sfb K,M,N: the sufficient-factor allreduce of a fully connected layer's
// gradient (tidegate_sfb_allreduce) against the plain allreduce of its M x N matrix, same
// factors, same run: the allreduce, then SFB under each method (auto: the HybComm rule's
// pick; factors; dense), each the median of the slowest rank's time, with the speed-up over the
// allreduce and (auto) the rule's choice.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "tidegate/tidegate.h"

namespace tidegate::bench {

struct SfbShapeOption {
  int64_t k = 0, m = 0, n = 0;  // K per rank
};

// Parses "K,M,N" (each a positive count; K may be 0). CONFIG error naming the text.
Status parse_sfb_shape(const std::string& text, SfbShapeOption* shape);

// Collective. Rank 0 prints the rows (and appends them to `json_path` as JSON lines when set).
Status run_sfb_bench(tidegate_comm_t comm, int rank, int size, const SfbShapeOption& shape,
                     int warmup, int iters, const std::string& json_path);

}  // namespace tidegate::bench
