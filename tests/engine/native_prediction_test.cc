// The native predictor's rule alone (engine/native_prediction.h): which op it predicts after
// which records, with no ranks. The multi-rank behaviour (the predicted collective, decoys,
// mismatches) is checked under mpirun by tests/multirank/native_check_mpi.cc.
#include "engine/native_prediction.h"

#include <gtest/gtest.h>

#include <vector>

#include "collectives/algorithm_table.h"

namespace tidegate {
namespace {

struct Op {
  CollectiveArgs args;
  PlanDecision decision;
};

// A dense host float32 SUM allreduce of `count` elements, planned natively on transport 1 (or
// on tcp/recursive_doubling when `native` is false).
Op allreduce(int64_t count, bool native = true) {
  Op op;
  op.args.kind = OpKind::kAllreduce;
  op.args.input.count = op.args.output.count = count;
  op.args.reduce_op = TIDEGATE_SUM;
  op.decision.transport_index = native ? 1 : 0;
  op.decision.algorithm =
      find_algorithm(OpKind::kAllreduce, native ? "native" : "recursive_doubling");
  return op;
}

Op barrier() {
  Op op;
  op.args.kind = OpKind::kBarrier;
  op.decision.algorithm = find_algorithm(OpKind::kBarrier, "dissemination");
  return op;
}

// The predicted count before each op of `ops` is planned (0: no prediction).
std::vector<int64_t> predictions(NativePredictor& predictor, const std::vector<Op>& ops) {
  std::vector<int64_t> seen;
  for (const Op& op : ops) {
    const auto next = predictor.next();
    seen.push_back(next ? next->count : 0);
    predictor.note_planned(op.args, op.decision);
  }
  return seen;
}

TEST(NativePredictor, OneOpRepeatedIsPredictedFromItsThirdTime) {
  NativePredictor predictor(4);
  const Op a = allreduce(100);
  EXPECT_EQ(predictions(predictor, {a, a, a, a}), (std::vector<int64_t>{0, 0, 100, 100}));
}

TEST(NativePredictor, ACycleIsPredictedOnceItRepeated) {
  NativePredictor predictor(4);
  const Op a = allreduce(100), b = allreduce(37), other = barrier();
  const std::vector<Op> step = {a, other, b, other};
  std::vector<Op> ops;
  for (int i = 0; i < 3; ++i) ops.insert(ops.end(), step.begin(), step.end());
  EXPECT_EQ(predictions(predictor, ops),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 37, 0}));
}

// A run of identical ops inside the cycle repeats with period 1 too; the longer period decides.
TEST(NativePredictor, ARunInsideACycleDoesNotHideTheCycle) {
  NativePredictor predictor(4);
  const Op a = allreduce(100), other = barrier();
  const std::vector<Op> ops = {a, other, other, a, other, other, a, other, other};
  EXPECT_EQ(predictions(predictor, ops), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 100, 0, 0}));
}

TEST(NativePredictor, ABrokenPatternStopsPredictingUntilItRepeatsAgain) {
  NativePredictor predictor(4);
  const Op a = allreduce(100), c = allreduce(8);
  EXPECT_EQ(predictions(predictor, {a, a, a, c, a, a, a}),
            (std::vector<int64_t>{0, 0, 100, 100, 0, 0, 100}));
}

TEST(NativePredictor, OnlySmallDenseHostNativeAllreducesArePredicted) {
  NativePredictor predictor(4);
  const Op own = allreduce(100, false);  // tidegate's own algorithm: nothing to predict
  EXPECT_EQ(predictions(predictor, {own, own, own}), (std::vector<int64_t>{0, 0, 0}));
  Op big = allreduce(int64_t{1} << 20);  // 4 MiB: above kMaxPredictedBytes
  EXPECT_EQ(predictions(predictor, {big, big, big}), (std::vector<int64_t>{0, 0, 0}));
  Op device = allreduce(100);
  device.args.input.memory = device.args.output.memory = TIDEGATE_MEMORY_CUDA;
  EXPECT_EQ(predictions(predictor, {device, device, device}), (std::vector<int64_t>{0, 0, 0}));
  Op half = allreduce(100);
  half.args.input.dtype = half.args.output.dtype = TIDEGATE_FLOAT16;
  EXPECT_EQ(predictions(predictor, {half, half, half}), (std::vector<int64_t>{0, 0, 0}));
  Op compressed = allreduce(100);
  compressed.args.compression.auto_codec = true;
  EXPECT_EQ(predictions(predictor, {compressed, compressed, compressed}),
            (std::vector<int64_t>{0, 0, 0}));
}

TEST(NativePredictor, Uint8SumNeedsFewerThan256Ranks) {
  Op a = allreduce(100);
  a.args.input.dtype = a.args.output.dtype = TIDEGATE_UINT8;
  NativePredictor small(kMaxRanksForUint8Flag);
  EXPECT_EQ(predictions(small, {a, a, a}), (std::vector<int64_t>{0, 0, 100}));
  NativePredictor large(kMaxRanksForUint8Flag + 1);
  EXPECT_EQ(predictions(large, {a, a, a}), (std::vector<int64_t>{0, 0, 0}));
  Op max = a;  // a MAX of 0/1 flags cannot wrap
  max.args.reduce_op = TIDEGATE_MAX;
  NativePredictor large_max(kMaxRanksForUint8Flag + 1);
  EXPECT_EQ(predictions(large_max, {max, max, max}), (std::vector<int64_t>{0, 0, 100}));
}

// The engine lets a rank contribute when the record of its op equals the prediction.
TEST(NativePredictor, OnlyTheSameSignatureWithANativePlanMatchesThePrediction) {
  const Op a = allreduce(100);
  Op max = a;
  max.args.reduce_op = TIDEGATE_MAX;
  const Op own_plan = {a.args, allreduce(100, false).decision};
  const struct {
    Op op;
    bool matches;
  } cases[] = {
      {a, true}, {allreduce(99), false}, {own_plan, false}, {max, false}, {barrier(), false}};
  for (const auto& c : cases) {
    NativePredictor predictor(4);
    predictions(predictor, {a, a});
    const NativePredictor::Record next = predictor.next();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(predictor.note_planned(c.op.args, c.op.decision) == next, c.matches);
  }
}

TEST(NativePredictor, ACycleLongerThanTheLongestPeriodIsNotPredicted) {
  const Op a = allreduce(100), other = barrier();
  for (const size_t length : {kMaxPeriod, kMaxPeriod + 1}) {
    NativePredictor predictor(4);
    std::vector<Op> step(length, other);
    step[0] = a;
    std::vector<Op> ops;
    for (int i = 0; i < 3; ++i) ops.insert(ops.end(), step.begin(), step.end());
    const std::vector<int64_t> seen = predictions(predictor, ops);
    const bool predicted_in_third_step = seen[2 * length] == 100;
    EXPECT_EQ(predicted_in_third_step, length <= kMaxPeriod) << "cycle of " << length;
  }
}

}  // namespace
}  // namespace tidegate
