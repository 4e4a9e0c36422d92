#include "numeric/outer_product.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "numeric/avx2_clones.h"

// Blocked like a GEMM (the layout of Goto and van de Geijn's "Anatomy of high-performance
// matrix multiplication"), with the factor rows as the inner dimension:
//  - A chunk of up to kDepth factor rows is packed: u transposed (m x depth, so that a row of
//    out reads its depth u values contiguously) and v in panels of two vectors' width (depth x
//    kPanel, contiguous, zero-padded past n). Packing is O(depth (m + n)) against the chunk's
//    O(depth m n) multiply-adds. Without it, factor rows 16 KiB apart (M and N multiples of
//    4096) fall into the same cache sets and evict each other.
//  - A micro-tile of kRows rows x one panel of out is summed in registers over the whole chunk
//    and stored once; the unpacked loop it replaces loaded and stored out for every factor row
//    (14.6 against 43.2 G multiply-adds per second on one core of bench/RESULTS.md's machine:
//    tidegate-codec-bench's sfb_products).
//  - Column blocks of about half an L2 of packed v are reused by every row group.
// Every element still starts at +0.0 and adds u_r[i] v_r[j] for r in factor order, a rounded
// multiply then a rounded add (no contraction: see CMakeLists.txt), chunk after chunk (a later
// chunk starts from the partial sum the earlier one stored, exactly), so the bits are those of
// the plain triple loop for any vector width, thread count or chunking.

namespace tidegate {
namespace {

typedef float f32x8 __attribute__((vector_size(32)));

constexpr int64_t kLanes = 8;                              // floats per f32x8
constexpr int64_t kPanel = 2 * kLanes;                     // columns of out per micro-tile
constexpr int64_t kRows = 6;                               // rows of out per micro-tile
constexpr int64_t kDepth = 256;                            // factor rows per packed chunk
constexpr int64_t kColumnBlockBytes = int64_t{512} << 10;  // packed v reused from L2

struct FactorRow {
  const float* u;  // m values
  const float* v;  // n values
};

struct PackedChunk {
  int64_t depth = 0;
  std::vector<float> ut;  // m x depth: ut[i * depth + r] = u_r[i]
  std::vector<float> vp;  // panels x depth x kPanel: v_r[p * kPanel + c], 0 past n
};

void pack(const FactorRow* rows, int64_t depth, int64_t m, int64_t n, PackedChunk* c) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  c->depth = depth;
  c->ut.resize(static_cast<size_t>(m * depth));
  c->vp.assign(static_cast<size_t>(panels * depth * kPanel), 0.0f);
  for (int64_t r = 0; r < depth; ++r) {
    const float* u = rows[r].u;
    for (int64_t i = 0; i < m; ++i) c->ut[i * depth + r] = u[i];
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * kPanel;
      std::memcpy(&c->vp[(p * depth + r) * kPanel], rows[r].v + j0,
                  static_cast<size_t>(std::min(kPanel, n - j0)) * sizeof(float));
    }
  }
}

// One micro-tile: out[row, 0..cols) for row < R, cols <= kPanel, over the chunk's depth
// factor rows (ut: this tile's first row in the packed u; panel: this tile's packed v). `first`
// starts from +0.0, else from what out holds (an earlier chunk's partial sums).
template <int R>
__attribute__((always_inline)) inline void micro_tile(const float* ut, int64_t depth,
                                                      const float* panel, float* out, int64_t n,
                                                      int64_t cols, bool first) {
  typedef f32x8 vec;
  constexpr size_t kBytes = sizeof(vec);
  vec acc[R][2];  // R x kPanel sums, in registers for the whole chunk
  const size_t bytes = static_cast<size_t>(cols) * sizeof(float);
  for (int row = 0; row < R; ++row) {
    if (first) {
      acc[row][0] = vec{};
      acc[row][1] = vec{};
    } else if (cols == kPanel) {  // fixed-size copies become vector moves
      std::memcpy(&acc[row][0], out + row * n, kBytes);
      std::memcpy(&acc[row][1], out + row * n + kLanes, kBytes);
    } else {
      float start[kPanel] = {};
      std::memcpy(start, out + row * n, bytes);
      std::memcpy(&acc[row][0], start, kBytes);
      std::memcpy(&acc[row][1], start + kLanes, kBytes);
    }
  }
  for (int64_t r = 0; r < depth; ++r) {
    vec b0, b1;
    std::memcpy(&b0, panel + r * kPanel, kBytes);
    std::memcpy(&b1, panel + r * kPanel + kLanes, kBytes);
    for (int row = 0; row < R; ++row) {
      // x - (+0.0) is x for every x, -0.0 included, so this folds to a plain broadcast (where
      // vec{} + x would have to add +0.0 first: -0.0 + +0.0 is +0.0).
      const vec a = ut[row * depth + r] - vec{};
      acc[row][0] += a * b0;
      acc[row][1] += a * b1;
    }
  }
  for (int row = 0; row < R; ++row) {
    if (cols == kPanel) {
      std::memcpy(out + row * n, &acc[row][0], kBytes);
      std::memcpy(out + row * n + kLanes, &acc[row][1], kBytes);
      continue;
    }
    float sums[kPanel];
    std::memcpy(sums, &acc[row][0], kBytes);
    std::memcpy(sums + kLanes, &acc[row][1], kBytes);
    std::memcpy(out + row * n, sums, bytes);
  }
}

// Rows [begin, end) of out from one packed chunk: 8-float vectors, AVX2 where the CPU has it
// (6 x 2 accumulators, two factor vectors and the broadcast fill 15 of its 16 registers), two
// SSE registers each on the x86-64 baseline. 16-float AVX-512 tiles were tried and ran about a
// quarter slower on that Zen 4, whose AVX-512 executes as two 256-bit halves.
TG_AVX2_CLONES void chunk_rows(const PackedChunk& c, int64_t n, int64_t begin, int64_t end,
                               float* out, bool first) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const int64_t block =
      std::max<int64_t>(1, kColumnBlockBytes / (c.depth * kPanel * int64_t{sizeof(float)}));
  for (int64_t pb = 0; pb < panels; pb += block) {
    const int64_t pe = std::min(panels, pb + block);
    for (int64_t i = begin; i < end; i += kRows) {
      const float* ut = &c.ut[i * c.depth];
      for (int64_t p = pb; p < pe; ++p) {
        const int64_t j0 = p * kPanel, cols = std::min(kPanel, n - j0);
        const float* panel = &c.vp[p * c.depth * kPanel];
        float* tile = out + i * n + j0;
        switch (std::min(kRows, end - i)) {
          case 6:
            micro_tile<6>(ut, c.depth, panel, tile, n, cols, first);
            break;
          case 5:
            micro_tile<5>(ut, c.depth, panel, tile, n, cols, first);
            break;
          case 4:
            micro_tile<4>(ut, c.depth, panel, tile, n, cols, first);
            break;
          case 3:
            micro_tile<3>(ut, c.depth, panel, tile, n, cols, first);
            break;
          case 2:
            micro_tile<2>(ut, c.depth, panel, tile, n, cols, first);
            break;
          default:
            micro_tile<1>(ut, c.depth, panel, tile, n, cols, first);
            break;
        }
      }
    }
  }
}

}  // namespace

void sum_outer_products(const FactorBlock* blocks, int block_count, int64_t m, int64_t n,
                        float* out, int threads) {
  if (m <= 0 || n <= 0) return;
  std::vector<FactorRow> rows;
  for (int b = 0; b < block_count; ++b) {
    for (int64_t r = 0; r < blocks[b].k; ++r) {
      rows.push_back({blocks[b].u + r * m, blocks[b].v + r * n});
    }
  }
  if (rows.empty()) {
    std::fill(out, out + m * n, 0.0f);
    return;
  }
  PackedChunk chunk;
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, (m + kRows - 1) / kRows));
  const int64_t groups = (m + kRows - 1) / kRows;
  for (size_t r0 = 0; r0 < rows.size(); r0 += kDepth) {
    const int64_t depth = std::min<int64_t>(kDepth, static_cast<int64_t>(rows.size() - r0));
    pack(&rows[r0], depth, m, n, &chunk);
    const bool first = r0 == 0;
    // Contiguous ranges of whole row groups: the rows a thread writes are its own.
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t) {
      const int64_t begin = std::min(m, groups * t / threads * kRows);
      const int64_t end = std::min(m, groups * (t + 1) / threads * kRows);
      if (begin < end)
        workers.emplace_back(chunk_rows, std::cref(chunk), n, begin, end, out, first);
    }
    chunk_rows(chunk, n, 0, std::min(m, groups / threads * kRows), out, first);
    for (auto& w : workers) w.join();
  }
}

}  // namespace tidegate
