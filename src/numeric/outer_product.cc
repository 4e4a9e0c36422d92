#include "numeric/outer_product.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "numeric/avx2_clones.h"

namespace tidegate {
namespace {

// Output tiles: 4 rows x 512 columns (8 KiB of accumulators, in L1) while the factor rows
// stream past; v's 512-column slice of every factor row stays in L2 across the m/4 row groups.
// (Register-blocked micro-tiles measured 2.5x slower here: with M and N multiples of 1024 the
// factor rows alias in the cache unless packed, and the packing costs what it saves.)
constexpr int64_t kTileRows = 4;
constexpr int64_t kTileCols = 512;

// out[i0..i1) x [j0..j1) from every factor row. The column loop is the vectorised one; each
// element's sum runs over the factor rows in order, so the vector width changes nothing.
TG_AVX2_CLONES void tile(const FactorBlock* blocks, int block_count, int64_t m, int64_t n,
                         int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* __restrict out) {
  for (int64_t i = i0; i < i1; ++i) std::fill(out + i * n + j0, out + i * n + j1, 0.0f);
  for (int b = 0; b < block_count; ++b) {
    const FactorBlock& block = blocks[b];
    for (int64_t r = 0; r < block.k; ++r) {
      const float* __restrict v = block.v + r * n;
      for (int64_t i = i0; i < i1; ++i) {
        const float a = block.u[r * m + i];
        float* __restrict row = out + i * n;
        for (int64_t j = j0; j < j1; ++j) row[j] += a * v[j];
      }
    }
  }
}

// Rows [begin, end) of out.
void row_range(const FactorBlock* blocks, int block_count, int64_t m, int64_t n, int64_t begin,
               int64_t end, float* out) {
  for (int64_t j0 = 0; j0 < n; j0 += kTileCols) {
    const int64_t j1 = std::min(n, j0 + kTileCols);
    for (int64_t i0 = begin; i0 < end; i0 += kTileRows) {
      tile(blocks, block_count, m, n, i0, std::min(end, i0 + kTileRows), j0, j1, out);
    }
  }
}

}  // namespace

void sum_outer_products(const FactorBlock* blocks, int block_count, int64_t m, int64_t n,
                        float* out, int threads) {
  if (m <= 0 || n <= 0) return;
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, (m + kTileRows - 1) / kTileRows));
  if (threads == 1) {
    row_range(blocks, block_count, m, n, 0, m, out);
    return;
  }
  // Contiguous row ranges, whole tiles each: the rows a thread writes are its own.
  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = std::min(m, tiles * t / threads * kTileRows);
    const int64_t end = std::min(m, tiles * (t + 1) / threads * kTileRows);
    if (begin >= end) continue;
    workers.emplace_back(row_range, blocks, block_count, m, n, begin, end, out);
  }
  for (auto& w : workers) w.join();
}

}  // namespace tidegate
