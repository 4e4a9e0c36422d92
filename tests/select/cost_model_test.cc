// The alpha-beta-gamma formulas against values computed by hand. Figures throughout:
// alpha 50 us, 1 GB/s (beta = 1e-3 us/B), reduce 10 GB/s (gamma = 1e-4 us/B), n = 1 MiB.
#include "select/cost_model.h"

#include <gtest/gtest.h>

namespace tidegate {
namespace {

constexpr int64_t kMiB = 1 << 20;

ProbeProfile profile_with(double reduce_GBps) {
  ProbeProfile profile;
  profile.reduce_GBps = reduce_GBps;
  return profile;
}

TransportFigures link(double alpha_us = 50, double bandwidth_GBps = 1) {
  TransportFigures figures;
  figures.transport = "tcp";
  figures.alpha_us = alpha_us;
  figures.bandwidth_GBps = bandwidth_GBps;
  return figures;
}

double predict(const std::string& algorithm, OpKind kind, int64_t bytes, int size,
               const TransportFigures& figures = link(), const Corrections& corrections = {},
               double reduce_GBps = 10) {
  CostQuery query;
  query.kind = kind;
  query.bytes = bytes;
  query.size = size;
  // A collective that has no such algorithm has no price (pairwise allreduce, native broadcast).
  const AlgorithmRow* row = find_algorithm(kind, algorithm);
  if (row == nullptr) return -1;
  return predicted_us(profile_with(reduce_GBps), figures, *row, query, corrections);
}

TEST(CostModel, RingAllreduceHandComputed) {
  // 2(P-1) alpha + (P-1)/P n (beta + max(beta, gamma)) = 300 + 0.75 * 1048576 * 2e-3.
  EXPECT_NEAR(predict("ring", OpKind::kAllreduce, kMiB, 4), 1872.864, 1e-6);
}

TEST(CostModel, RecursiveDoublingAndRabenseifnerHandComputed) {
  // log2(P) (alpha + n beta + n gamma) = 2 * (50 + 1048.576 + 104.8576).
  EXPECT_NEAR(predict("recursive_doubling", OpKind::kAllreduce, kMiB, 4), 2406.8672, 1e-6);
  // 2 log2(P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma = 200 + 1572.864 + 78.6432.
  EXPECT_NEAR(predict("rabenseifner", OpKind::kAllreduce, kMiB, 4), 1851.5072, 1e-6);
}

TEST(CostModel, NonPowerOfTwoAddsTheFoldSteps) {
  // P = 6 runs on 4 ranks plus a fold (alpha + n beta + n gamma) and an unfold (alpha + n beta):
  // 3 * (50 + 1 + 0.1) + (50 + 1) for 1000 bytes.
  EXPECT_NEAR(predict("recursive_doubling", OpKind::kAllreduce, 1000, 6), 204.3, 1e-9);
  double p4 = predict("rabenseifner", OpKind::kAllreduce, 1000, 4);
  EXPECT_NEAR(predict("rabenseifner", OpKind::kAllreduce, 1000, 6), p4 + 51.1 + 51, 1e-9);
}

TEST(CostModel, OtherCollectivesHandComputed) {
  EXPECT_NEAR(predict("ring", OpKind::kReduceScatter, kMiB, 4), 936.432, 1e-6);
  EXPECT_NEAR(predict("ring", OpKind::kAllgather, kMiB, 4), 936.432, 1e-6);
  EXPECT_NEAR(predict("ring", OpKind::kAllgatherv, kMiB, 4), 936.432, 1e-6);
  EXPECT_NEAR(predict("pairwise", OpKind::kAlltoallv, kMiB, 4), 936.432, 1e-6);
  // ceil(log2 5) = 3 rounds of the whole vector.
  EXPECT_NEAR(predict("binomial", OpKind::kBroadcast, kMiB, 5), 3 * (50 + 1048.576), 1e-6);
  EXPECT_NEAR(predict("dissemination", OpKind::kBarrier, 0, 5), 150, 1e-9);
}

TEST(CostModel, SlowReductionBoundsThePipelinedRing) {
  // gamma (1e-3 at 1 GB/s) above beta (1e-4 at 10 GB/s): the reduce-scatter step costs gamma.
  double us = predict("ring", OpKind::kReduceScatter, kMiB, 4, link(50, 10), {}, 1);
  EXPECT_NEAR(us, 150 + 786.432, 1e-6);
}

TEST(CostModel, ZeroBytesIsLatencyOnly) {
  EXPECT_NEAR(predict("ring", OpKind::kAllreduce, 0, 4), 300, 1e-9);
  EXPECT_NEAR(predict("recursive_doubling", OpKind::kAllreduce, 0, 4), 100, 1e-9);
}

TEST(CostModel, SingleRankIsATinyConstant) {
  double ring = predict("ring", OpKind::kAllreduce, kMiB, 1);
  EXPECT_GT(ring, 0);
  EXPECT_LT(ring, 1);
  EXPECT_EQ(ring, predict("recursive_doubling", OpKind::kAllreduce, 64 * kMiB, 1));
}

TEST(CostModel, UnknownFiguresAndPairsAreNoCandidate) {
  EXPECT_LT(predict("ring", OpKind::kAllreduce, kMiB, 4, link(50, 0)), 0);
  EXPECT_LT(predict("ring", OpKind::kAllreduce, kMiB, 4, link(-1, 1)), 0);
  EXPECT_LT(predict("ring", OpKind::kAllreduce, kMiB, 4, link(), {}, 0), 0);  // no gamma
  EXPECT_GT(predict("ring", OpKind::kAllgather, kMiB, 4, link(), {}, 0), 0);  // needs none
  EXPECT_LT(predict("pairwise", OpKind::kAllreduce, kMiB, 4), 0);
  EXPECT_LT(predict("native", OpKind::kBroadcast, kMiB, 4), 0);
  EXPECT_LT(predict("ring", OpKind::kInternal, kMiB, 4), 0);
  EXPECT_LT(predict("ring", OpKind::kAllreduce, -1, 4), 0);
  EXPECT_LT(predict("ring", OpKind::kAllreduce, kMiB, 0), 0);
}

TEST(CostModel, MeasuredNativeUsesItsOwnFigures) {
  TransportFigures figures = link();
  figures.native_alpha_us = 10;
  figures.native_bandwidth_GBps = 2;  // 5e-4 us/B
  // allreduce: 10 + n * 5e-4 * 2(P-1)/P; allgather/reduce_scatter: (P-1)/P.
  EXPECT_NEAR(predict("native", OpKind::kAllreduce, kMiB, 4, figures), 796.432, 1e-6);
  EXPECT_NEAR(predict("native", OpKind::kAllgather, kMiB, 4, figures), 403.216, 1e-6);
  EXPECT_NEAR(predict("native", OpKind::kReduceScatter, kMiB, 4, figures), 403.216, 1e-6);
}

// Above the largest size the native figures were fitted on, native is no better than our best
// plus one latency (a vendor may switch algorithm there); below, the fit stands.
TEST(CostModel, MeasuredNativeIsNotExtrapolatedBeyondItsLargestSize) {
  TransportFigures figures = link();
  figures.native_alpha_us = 10;
  figures.native_bandwidth_GBps = 2;
  figures.native_max_bytes = kMiB / 2;
  EXPECT_NEAR(predict("native", OpKind::kAllreduce, kMiB / 4, 4, figures),
              10 + 0.25 * kMiB * 5e-4 * 1.5, 1e-6);
  EXPECT_NEAR(predict("native", OpKind::kAllreduce, kMiB, 4, figures), 1851.5072 + 50, 1e-6);
}

TEST(CostModel, UnmeasuredNativeIsOurBestPlusOneLatency) {
  // The best of our own at 1 MiB, P = 4, is Rabenseifner (1851.5072).
  EXPECT_NEAR(predict("native", OpKind::kAllreduce, kMiB, 4), 1851.5072 + 50, 1e-6);
  EXPECT_NEAR(predict("native", OpKind::kAllgather, kMiB, 4), 936.432 + 50, 1e-6);
}

TEST(CostModel, CorrectionsScaleOnlyTheirPair) {
  Corrections corrections{{{"tcp", "ring"}, 2.0}, {{"mpi", "rabenseifner"}, 10.0}};
  EXPECT_NEAR(predict("ring", OpKind::kAllreduce, kMiB, 4, link(), corrections), 3745.728, 1e-6);
  EXPECT_NEAR(predict("rabenseifner", OpKind::kAllreduce, kMiB, 4, link(), corrections), 1851.5072,
              1e-6);
}

TEST(CostModel, RankingFlipsWithSize) {
  // Small: recursive doubling's log2(P) messages win; large: the ring's pipelined reduction.
  auto best = [](int64_t bytes) {
    std::string best_name;
    double best_us = -1;
    for (const char* name : {"ring", "recursive_doubling", "rabenseifner"}) {
      double us = predict(name, OpKind::kAllreduce, bytes, 8);
      if (best_us < 0 || us < best_us) best_us = us, best_name = name;
    }
    return best_name;
  };
  EXPECT_EQ(best(1024), "recursive_doubling");
  EXPECT_EQ(best(256 * 1024), "rabenseifner");
  EXPECT_EQ(best(256 * kMiB), "ring");
}

}  // namespace
}  // namespace tidegate
