#include "select/hybcomm.h"

#include <cstdio>

namespace tidegate {

HybCommChoice choose_hybcomm(const SfbShape& s, const HybCommPrices& prices) {
  HybCommChoice c;
  const auto floats = static_cast<int64_t>(sizeof(float));
  const double mn = static_cast<double>(s.m) * static_cast<double>(s.n);
  const double gathered = prices.allgather_us(s.total_k * (s.m + s.n) * floats);
  const double reduced = prices.allreduce_us(s.m * s.n * floats);
  if (prices.macs_per_us > 0 && gathered >= 0) {
    c.sfb_us = gathered + static_cast<double>(s.total_k) * mn / prices.macs_per_us;
  }
  if (prices.macs_per_us > 0 && reduced >= 0) {
    c.dense_us = reduced + static_cast<double>(s.local_k) * mn / prices.macs_per_us;
  }
  c.sfb = c.sfb_us >= 0 && (c.dense_us < 0 || c.sfb_us < c.dense_us);
  char line[160];
  std::snprintf(line, sizeof line, "predicted sfb %.0f us, dense %.0f us", c.sfb_us, c.dense_us);
  c.why = line;
  return c;
}

}  // namespace tidegate
