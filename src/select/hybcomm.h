// Poseidon's HybComm rule (Zhang et al., ATC'17): a fully connected layer's gradient (M x N)
// is the sum over the batch of outer products, so ranks may send the sufficient factors
// (K x M and K x N each: SFB, every rank then forms the sum of all ranks' products) instead of
// allreducing the matrix. SFB sends P K (M + N) floats to every rank and multiplies P times as
// much; the allreduce sends about 2 M N. The rule prices both with the plan's own predictions
// of the allgather and the allreduce and the agreed speed of the product kernel, and picks the
// cheaper (dense on a tie). Every input is agreed across ranks, so every rank picks alike.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tidegate {

struct SfbShape {
  int64_t total_k = 0;  // sum over ranks of each rank's K (batch rows)
  int64_t m = 0, n = 0;
  int64_t local_k = 0;  // the largest K of one rank (the dense path's own product)
};

struct HybCommPrices {
  // The plan's predicted microseconds of a dense allgather of `bytes` in total and of a dense
  // allreduce of `bytes` (negative: cannot price).
  std::function<double(int64_t bytes)> allgather_us, allreduce_us;
  double macs_per_us = 0;  // the product kernel's agreed speed (multiply-adds per microsecond)
};

struct HybCommChoice {
  bool sfb = false;
  double sfb_us = -1, dense_us = -1;  // the two predictions
  std::string why;                    // one line for tidegate_request_choice and logs
};

HybCommChoice choose_hybcomm(const SfbShape& shape, const HybCommPrices& prices);

}  // namespace tidegate
