// Sums of outer products (numeric/outer_product.h): the right values, and the same bits for
// any thread count and tile split, including shapes that are not multiples of a tile.
#include "numeric/outer_product.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace tidegate {
namespace {

std::vector<float> values(int64_t count, int seed) {
  std::vector<float> x(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) x[i] = std::sin(0.37f * static_cast<float>(i + 13 * seed));
  return x;
}

TEST(OuterProduct, MatchesTheFloat64SumAndIsTheSameForAnyThreadCount) {
  const int64_t m = 37, n = 1031;  // neither a multiple of a tile
  const int64_t ks[] = {3, 0, 5};  // a block without rows adds nothing
  std::vector<std::vector<float>> us, vs;
  std::vector<FactorBlock> blocks;
  for (int b = 0; b < 3; ++b) {
    us.push_back(values(ks[b] * m, b));
    vs.push_back(values(ks[b] * n, b + 10));
  }
  for (int b = 0; b < 3; ++b) blocks.push_back({us[b].data(), vs[b].data(), ks[b]});
  std::vector<float> one(m * n, -1.0f), three(m * n, -2.0f);
  sum_outer_products(blocks.data(), 3, m, n, one.data(), 1);
  sum_outer_products(blocks.data(), 3, m, n, three.data(), 3);
  ASSERT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int b = 0; b < 3; ++b) {
        for (int64_t r = 0; r < ks[b]; ++r) {
          exact += static_cast<double>(us[b][r * m + i]) * vs[b][r * n + j];
        }
      }
      ASSERT_NEAR(one[i * n + j], exact, 1e-5) << i << "," << j;
    }
  }
}

// The plain triple loop in factor order, a rounded multiply then a rounded add (volatile keeps
// a compiler from contracting them into an FMA).
std::vector<float> plain_sum(const std::vector<FactorBlock>& blocks, int64_t m, int64_t n) {
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (const FactorBlock& b : blocks) {
        for (int64_t r = 0; r < b.k; ++r) {
          volatile float product = b.u[r * m + i] * b.v[r * n + j];
          sum = sum + product;
        }
      }
      out[i * n + j] = sum;
    }
  }
  return out;
}

TEST(OuterProduct, GivesThePlainLoopsBitsAcrossPackedChunksForAnyThreadCount) {
  // 300 factor rows in three blocks cross the 256-row packing chunk, so the second chunk starts
  // from the partial sums the first stored; m and n are not multiples of a tile or a panel.
  const int64_t m = 23, n = 77;
  const int64_t ks[] = {140, 0, 160};
  std::vector<std::vector<float>> us, vs;
  std::vector<FactorBlock> blocks;
  for (int b = 0; b < 3; ++b) {
    us.push_back(values(ks[b] * m, 7 + b));
    vs.push_back(values(ks[b] * n, 20 + b));
  }
  for (int b = 0; b < 3; ++b) blocks.push_back({us[b].data(), vs[b].data(), ks[b]});
  const std::vector<float> expected = plain_sum(blocks, m, n);
  for (int threads : {1, 2, 5}) {
    std::vector<float> out(static_cast<size_t>(m * n), 3.0f);
    sum_outer_products(blocks.data(), 3, m, n, out.data(), threads);
    ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)), 0)
        << "threads " << threads;
  }
}

TEST(OuterProduct, AccumulatesInFactorOrderWithoutFusedMultiplyAdd) {
  // -(1 + 2^-11) + (1 + 2^-12)^2: the product rounds to 1 + 2^-11, so the sum is 0; a fused
  // multiply-add would keep the product's 2^-24 and give 2^-24 on CPUs that have one.
  const float u[2] = {-1.0f, 1.0f + 0x1p-12f};
  const float v[2] = {1.0f + 0x1p-11f, 1.0f + 0x1p-12f};
  const FactorBlock block{u, v, 2};
  float out = 5.0f;
  sum_outer_products(&block, 1, 1, 1, &out);
  EXPECT_EQ(out, 0.0f);
}

TEST(OuterProduct, EmptyShapesWriteNothing) {
  float out = 7.0f;
  sum_outer_products(nullptr, 0, 0, 5, &out);
  EXPECT_EQ(out, 7.0f);
}

TEST(OuterProduct, NoFactorRowsGiveZeros) {
  std::vector<float> out(6, 7.0f);
  const FactorBlock empty{nullptr, nullptr, 0};
  sum_outer_products(&empty, 1, 2, 3, out.data());
  EXPECT_EQ(out, std::vector<float>(6, 0.0f));
}

}  // namespace
}  // namespace tidegate
