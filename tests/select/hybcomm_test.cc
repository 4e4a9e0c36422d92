// Poseidon's HybComm rule (select/hybcomm.h) on a modelled 4-rank 1 Gbit/s link: sufficient
// factors for a thin batch of a large layer, dense for a thick batch; dense on a tie or when
// SFB cannot be priced.
#include "select/hybcomm.h"

#include <gtest/gtest.h>

namespace tidegate {
namespace {

// Ring-like prices on 4 ranks at 125 bytes/us with 50 us per step.
HybCommPrices gigabit(double macs_per_us) {
  HybCommPrices p;
  p.allgather_us = [](int64_t bytes) { return 3 * 50.0 + 0.75 * static_cast<double>(bytes) / 125; };
  p.allreduce_us = [](int64_t bytes) { return 6 * 50.0 + 1.5 * static_cast<double>(bytes) / 125; };
  p.macs_per_us = macs_per_us;
  return p;
}

TEST(HybComm, ThinBatchesSendFactorsThickOnesTheMatrix) {
  // 13000 multiply-adds per microsecond: the kernel's speed on one core of the CI machine.
  const HybCommChoice thin = choose_hybcomm({4 * 32, 4096, 4096, 32}, gigabit(13000));
  EXPECT_TRUE(thin.sfb) << thin.why;
  // The factors: 4 MiB gathered (25 ms) and 2.1 G multiply-adds (165 ms); the matrix: 64 MiB
  // allreduced (805 ms) after a local product of 0.5 G.
  EXPECT_NEAR(thin.sfb_us, 150 + 0.75 * 4 * 1024 * 1024 / 125 + 128.0 * 4096 * 4096 / 13000, 1);
  EXPECT_LT(thin.sfb_us * 4, thin.dense_us) << thin.why;
  const HybCommChoice thick = choose_hybcomm({4 * 4096, 4096, 4096, 4096}, gigabit(13000));
  EXPECT_FALSE(thick.sfb) << thick.why;
}

TEST(HybComm, ASlowKernelOrAnUnpricedAllgatherMeansDense) {
  // At 10 multiply-adds per microsecond the 4 ranks' products cost more than the wire saves.
  EXPECT_FALSE(choose_hybcomm({4 * 32, 4096, 4096, 32}, gigabit(10)).sfb);
  HybCommPrices unpriced = gigabit(4000);
  unpriced.allgather_us = [](int64_t) { return -1.0; };
  EXPECT_FALSE(choose_hybcomm({4 * 32, 4096, 4096, 32}, unpriced).sfb);
}

}  // namespace
}  // namespace tidegate
