// The gradient session's scheduler rule (engine/gradient_schedule.h) on its own: priority
// order, fusion up to the fusion size by dtype, chunking with the batch limit, compressed
// gradients whole, zero-element gradients, the agreed-order mode, and that the same agreed
// counts always give the same ops.
#include "engine/gradient_schedule.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tidegate {
namespace {

SessionGradient grad(uint64_t key, int64_t count, int priority, bool compressed = false,
                     tidegate_dtype_t dtype = TIDEGATE_FLOAT32) {
  SessionGradient g;
  g.key = key;
  g.count = count;
  g.priority = priority;
  g.compressed = compressed;
  g.dtype = dtype;
  return g;
}

ScheduleKnobs knobs(int64_t fusion, int64_t chunk, int64_t batch, bool by_priority = true) {
  ScheduleKnobs k;
  k.fusion_bytes = fusion;
  k.chunk_bytes = chunk;
  k.batch_bytes = batch;
  k.by_priority = by_priority;
  return k;
}

// Agrees the gradients at `indexes` (every one of `size` ranks marked them).
void agree(GradientSchedule& s, const std::vector<size_t>& indexes, int size = 4) {
  std::vector<int32_t> counts(s.size(), 0);
  for (size_t i : indexes) counts[i] = size;
  s.agree(counts.data(), size);
}

// Every element of every gradient is scheduled exactly once, pieces contiguous and in order.
void expect_covers_everything(const GradientSchedule& s, const std::vector<ScheduledOp>& ops) {
  std::vector<int64_t> next(s.size(), 0);
  for (const ScheduledOp& op : ops) {
    for (const SchedulePiece& p : op.pieces) {
      EXPECT_EQ(p.offset, next[p.gradient]) << "gradient " << p.gradient;
      next[p.gradient] += p.count;
    }
  }
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(next[i], s.gradient(i).count) << "gradient " << i;
}

TEST(GradientSchedule, HighestPriorityFirstAmongTheAgreed) {
  GradientSchedule s({grad(10, 1000, 2), grad(11, 1000, 0), grad(12, 1000, 1)},
                     knobs(-1, -1, 1 << 30));
  s.begin_step();
  agree(s, {0, 1, 2});
  const std::vector<ScheduledOp> ops = s.next_batch(true);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].pieces[0].gradient, 1u);
  EXPECT_EQ(ops[1].pieces[0].gradient, 2u);
  EXPECT_EQ(ops[2].pieces[0].gradient, 0u);
  EXPECT_TRUE(s.everything_agreed());
}

TEST(GradientSchedule, NothingRunsUntilEveryRankMarkedIt) {
  GradientSchedule s({grad(1, 10, 0), grad(2, 10, 1)}, knobs(-1, -1, 1 << 30));
  s.begin_step();
  std::vector<int32_t> counts = {3, 4};  // gradient 0 on 3 of 4 ranks only
  s.agree(counts.data(), 4);
  std::vector<ScheduledOp> ops = s.next_batch(false);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].pieces[0].gradient, 1u);
  EXPECT_FALSE(s.everything_agreed());
  counts = {4, 4};
  s.agree(counts.data(), 4);
  ops = s.next_batch(false);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].pieces[0].gradient, 0u);
  EXPECT_TRUE(s.everything_agreed());
}

TEST(GradientSchedule, SmallGradientsFuseByDtypeUpToTheFusionSize) {
  // Ten 400-byte float32 gradients and one float64: fusion 1000 bytes packs two per op.
  std::vector<SessionGradient> g;
  for (int i = 0; i < 10; ++i) g.push_back(grad(static_cast<uint64_t>(i), 100, i));
  g.push_back(grad(99, 10, 3, false, TIDEGATE_FLOAT64));
  GradientSchedule s(g, knobs(1000, -1, 1 << 30));
  s.begin_step();
  std::vector<size_t> all(g.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  agree(s, all);
  const std::vector<ScheduledOp> ops = s.next_batch(true);
  expect_covers_everything(s, ops);
  int fused = 0;
  for (const ScheduledOp& op : ops) {
    EXPECT_LE(op.bytes, 1000);
    tidegate_dtype_t dtype = s.gradient(op.pieces[0].gradient).dtype;
    for (const SchedulePiece& p : op.pieces) EXPECT_EQ(s.gradient(p.gradient).dtype, dtype);
    fused += op.fused() ? 1 : 0;
  }
  EXPECT_EQ(fused, 5);
  EXPECT_EQ(ops.size(), 6u);  // five float32 pairs and the float64 alone
  // The first op holds the two highest-priority gradients.
  EXPECT_EQ(ops[0].pieces[0].gradient, 0u);
  EXPECT_EQ(ops[0].pieces[1].gradient, 1u);
}

TEST(GradientSchedule, LargeGradientsAreCutAndTheBatchStopsAtItsLimit) {
  // 2^20 + 3 float32 elements, pieces of 1 MiB, batches of 1 MiB: one piece per batch, and the
  // last piece holds the odd three elements.
  const int64_t count = (int64_t{1} << 20) + 3;
  GradientSchedule s({grad(5, count, 0), grad(6, 1, 1), grad(7, 0, 2)},
                     knobs(64 << 10, 1 << 20, 1 << 20));
  s.begin_step();
  agree(s, {0, 1, 2});
  std::vector<ScheduledOp> all;
  int batches = 0;
  while (!s.backlog_empty()) {
    std::vector<ScheduledOp> batch = s.next_batch(false);
    ASSERT_FALSE(batch.empty());
    ++batches;
    all.insert(all.end(), batch.begin(), batch.end());
  }
  expect_covers_everything(s, all);
  EXPECT_EQ(batches, 5);
  ASSERT_EQ(all.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(all[static_cast<size_t>(i)].chunk);
    EXPECT_EQ(all[static_cast<size_t>(i)].pieces[0].count, 262144);
  }
  EXPECT_EQ(all[4].pieces[0].count, 3);
  // The 1-element and the 0-element gradients fused together after it.
  EXPECT_TRUE(all[5].fused());
  EXPECT_EQ(all[5].bytes, 4);
}

TEST(GradientSchedule, AGradientAgreedLateOvertakesTheRestOfACutOne) {
  GradientSchedule s({grad(1, 1 << 20, 5), grad(2, 100, 0)}, knobs(-1, 1 << 20, 1 << 20));
  s.begin_step();
  agree(s, {0});
  std::vector<ScheduledOp> first = s.next_batch(false);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].pieces[0].gradient, 0u);
  agree(s, {1});  // the first layer's gradient, ready last
  std::vector<ScheduledOp> second = s.next_batch(false);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second[0].pieces[0].gradient, 1u);
  EXPECT_EQ(second[0].bytes, 400);
}

TEST(GradientSchedule, CompressedGradientsAreNeverFusedOrCut) {
  GradientSchedule s({grad(1, 10, 0, true), grad(2, 10, 1, true), grad(3, 1 << 22, 2, true)},
                     knobs(1 << 20, 1 << 20, 1 << 30));
  s.begin_step();
  agree(s, {0, 1, 2});
  const std::vector<ScheduledOp> ops = s.next_batch(true);
  ASSERT_EQ(ops.size(), 3u);
  for (const ScheduledOp& op : ops) {
    EXPECT_FALSE(op.fused());
    EXPECT_FALSE(op.chunk);
  }
}

TEST(GradientSchedule, AgreedOrderModeRunsByRoundThenBackwardOrder) {
  GradientSchedule s({grad(1, 10, 0), grad(2, 10, 1), grad(3, 10, 2)},
                     knobs(-1, -1, 1 << 30, /*by_priority=*/false));
  s.begin_step();
  agree(s, {0});
  agree(s, {1, 2});
  const std::vector<ScheduledOp> ops = s.next_batch(true);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].pieces[0].gradient, 0u);  // agreed first
  EXPECT_EQ(ops[1].pieces[0].gradient, 2u);  // then backward order within the round
  EXPECT_EQ(ops[2].pieces[0].gradient, 1u);
}

TEST(GradientSchedule, TheSameAgreedCountsAlwaysGiveTheSameOps) {
  std::mt19937 rng(7);
  std::vector<SessionGradient> g;
  for (int i = 0; i < 60; ++i) {
    const int64_t count = static_cast<int64_t>(rng() % 3 == 0 ? rng() % 400000 : rng() % 3000);
    g.push_back(
        grad(static_cast<uint64_t>(1000 - i), count, static_cast<int>(rng() % 20), rng() % 7 == 0));
  }
  auto run = [&](uint32_t seed) {
    std::mt19937 rounds(seed);
    GradientSchedule s(g, knobs(16 << 10, 256 << 10, 512 << 10));
    s.begin_step();
    std::vector<ScheduledOp> all;
    std::vector<int32_t> counts(g.size(), 0);
    while (!s.everything_agreed() || !s.backlog_empty()) {
      for (auto& c : counts) c = std::min<int32_t>(4, c + static_cast<int32_t>(rounds() % 2));
      s.agree(counts.data(), 4);
      std::vector<ScheduledOp> batch = s.next_batch(s.everything_agreed());
      all.insert(all.end(), batch.begin(), batch.end());
    }
    expect_covers_everything(s, all);
    return all;
  };
  const std::vector<ScheduledOp> a = run(1), b = run(1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].pieces.size(), b[i].pieces.size());
    for (size_t j = 0; j < a[i].pieces.size(); ++j) {
      EXPECT_EQ(a[i].pieces[j].gradient, b[i].pieces[j].gradient);
      EXPECT_EQ(a[i].pieces[j].offset, b[i].pieces[j].offset);
    }
  }
}

}  // namespace
}  // namespace tidegate
