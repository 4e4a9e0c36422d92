#include "compress/topk_select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>

#include "base/types.h"
#include "compress/float_io.h"
#include "compress/magnitude_scan.h"
#include "compress/parallel.h"
#include "compress/seeded_random.h"

namespace tidegate {
namespace {

constexpr int64_t kSampleSize = 16384;
// The sample positions are fixed (not from EncodeContext::seed), so top-k stays deterministic.
constexpr uint64_t kSampleSeed = 0x746f706b73616d70ull;  // "topksamp"
constexpr double kApproxLowerBound = 0.8;
// Blocks (of kScanBlock elements) per thread of the collecting pass: 1 Mi elements, so that
// starting a thread costs well under a percent of its share.
constexpr int64_t kMinBlocksPerThread = int64_t{1} << 16;

// The buffer of collected elements, always in ascending index order. Arrays are allocated
// uninitialised (only the part in use is ever touched) with a block of slack past capacity, so
// a block's hits can be appended before the capacity check of the next block.
struct Candidates {
  explicit Candidates(int64_t slots) : capacity(slots) {
    kept.indices =
        std::make_unique_for_overwrite<int64_t[]>(static_cast<size_t>(slots + kScanBlock));
    kept.values = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(slots + kScanBlock));
  }
  int64_t capacity;
  TopKSelection kept;                   // indices, values and size of the buffer
  std::unique_ptr<uint32_t[]> scratch;  // magnitudes for nth_element, allocated on first use
};

// Slots for collecting from `length` elements with `expected` of them expected to pass: twice
// the larger of k and that, plus blocks of slack, or the whole range when it is shorter.
int64_t candidate_slots(int64_t length, int64_t k, int64_t expected) {
  return std::min(length, 2 * std::max(k, expected) + 4 * kScanBlock);
}

// Keeps the best `keep` candidates (1 <= keep <= size) in index order and returns the magnitude
// of the weakest one kept. Of the candidates with exactly that magnitude, the lowest-indexed win.
uint32_t keep_best(Candidates* c, int64_t keep) {
  TopKSelection& b = c->kept;
  if (!c->scratch)
    c->scratch =
        std::make_unique_for_overwrite<uint32_t[]>(static_cast<size_t>(c->capacity + kScanBlock));
  uint32_t* magnitudes = c->scratch.get();
  for (int64_t i = 0; i < b.size; ++i) magnitudes[i] = magnitude_bits(b.values[i]);
  std::nth_element(magnitudes, magnitudes + (keep - 1), magnitudes + b.size, std::greater<>());
  const uint32_t weakest = magnitudes[keep - 1];
  int64_t above = 0;
  for (int64_t i = 0; i < b.size; ++i) above += magnitude_bits(b.values[i]) > weakest ? 1 : 0;
  int64_t ties_left = keep - above;
  int64_t out = 0;
  for (int64_t i = 0; i < b.size; ++i) {
    const uint32_t m = magnitude_bits(b.values[i]);
    if (m > weakest || (m == weakest && ties_left-- > 0)) {
      b.indices[out] = b.indices[i];
      b.values[out] = b.values[i];
      ++out;
    }
  }
  b.size = keep;
  return weakest;
}

// Appends the block's elements whose bits are set in `hits`. Returns the first non-finite
// one's index (every non-finite element passes any threshold, so it is among the hits), or -1.
int64_t append_hits(const float* x, int64_t begin, uint32_t hits, TopKSelection* b) {
  int64_t size = b->size;
  uint32_t non_finite = 0;
  for (; hits != 0; hits &= hits - 1) {
    const int64_t j = begin + std::countr_zero(hits);
    non_finite |= magnitude_bits(x[j]) >= kNonFiniteMagnitude ? 1u : 0u;
    b->indices[size] = j;
    b->values[size] = x[j];
    ++size;
  }
  b->size = size;
  if (non_finite == 0) return -1;
  for (int64_t j = begin;; ++j) {
    if (magnitude_bits(x[j]) >= kNonFiniteMagnitude) return j;
  }
}

// Collects x[i], i in [begin, end), with magnitude >= threshold into c, compacting to the best
// k whenever fewer than a block's worth of slots remain (capacity >= 2k + 2 blocks, or at least
// end - begin). begin is a multiple of kScanBlock. Returns the first non-finite index, or -1.
int64_t collect(const float* x, int64_t begin, int64_t end, int64_t k, uint32_t threshold,
                Candidates* c, int64_t* compactions) {
  for (int64_t i = begin; i < end; i += kScanBlock) {
    // Compacting needs more than k candidates. A buffer sized to the whole range (shorter than
    // a block plus k) never needs it: the slack past capacity takes any block's hits.
    if (c->kept.size > k && c->kept.size + kScanBlock > c->capacity) {
      threshold = keep_best(c, k) + 1;  // the weakest kept is finite, so threshold <= +Inf's bits
      ++*compactions;
    }
    uint32_t hits = 0;
    if (i + kScanBlock <= end) {
      hits = block_magnitude_mask(x + i, threshold);
    } else {
      for (int64_t j = i; j < end; ++j)
        hits |= magnitude_bits(x[j]) >= threshold ? 1u << (j - i) : 0u;
    }
    if (hits == 0) continue;
    const int64_t bad = append_hits(x, i, hits, &c->kept);
    if (bad >= 0) return bad;
  }
  return -1;
}

// The collecting pass over `ranges` contiguous ranges of blocks, one thread each. Each range
// keeps its own best k (any of them may hold the whole top k); the buffers are concatenated in
// range order, so the merged buffer is in index order and holds the same top k, or (when no
// range compacted) exactly the elements at or above the threshold, for any number of ranges.
int64_t collect_ranges(const float* x, int64_t n, int64_t k, uint32_t threshold, int64_t expected,
                       int ranges, Candidates* merged, TopKStats* stats) {
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  std::vector<std::unique_ptr<Candidates>> parts(static_cast<size_t>(ranges));
  std::vector<int64_t> bad(static_cast<size_t>(ranges), -1),
      compactions(static_cast<size_t>(ranges), 0);
  const Status st = parallel_ranges(ranges, ranges, 1, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      int64_t block = 0, count = 0;
      block_range(blocks, ranges, static_cast<int>(r), &block, &count);
      const int64_t begin = block * kScanBlock, end = std::min(n, (block + count) * kScanBlock);
      const auto share =
          static_cast<int64_t>(static_cast<double>(expected) * (end - begin) / n) + 1;
      parts[r] = std::make_unique<Candidates>(candidate_slots(end - begin, k, share));
      bad[r] = collect(x, begin, end, k, threshold, parts[r].get(), &compactions[r]);
    }
    return Status::ok();
  });
  (void)st;  // the ranges cannot fail; non-finite elements are reported through bad[]
  int64_t total = 0;
  for (int r = 0; r < ranges; ++r) {
    if (bad[r] >= 0) return bad[r];  // the lowest range's first is the tensor's first
    total += parts[r]->kept.size;
    stats->compactions += compactions[r];
  }
  if (ranges == 1) {
    *merged = std::move(*parts[0]);
    return -1;
  }
  *merged = Candidates(std::max<int64_t>(total, 1));
  for (int r = 0; r < ranges; ++r) {
    const TopKSelection& part = parts[r]->kept;
    std::copy(part.indices.get(), part.indices.get() + part.size,
              merged->kept.indices.get() + merged->kept.size);
    std::copy(part.values.get(), part.values.get() + part.size,
              merged->kept.values.get() + merged->kept.size);
    merged->kept.size += part.size;
  }
  return -1;
}

// A stratified sample's magnitude at a rank chosen so that about 1.1 k + 3 sigma elements of
// the tensor are expected at or above it. Sets *expected to that expectation.
uint32_t sampled_threshold(const float* x, int64_t n, int64_t k, int64_t* expected) {
  std::vector<uint32_t> sample(static_cast<size_t>(kSampleSize));
  for (int64_t s = 0; s < kSampleSize; ++s) {
    // Stratum s of kSampleSize: [n s / S, n (s + 1) / S), in 128 bits (n s can pass 2^63).
    const auto begin = static_cast<int64_t>(static_cast<seeded_u128>(n) * s / kSampleSize);
    const auto length =
        static_cast<int64_t>(static_cast<seeded_u128>(n) * (s + 1) / kSampleSize) - begin;
    const int64_t position = begin + static_cast<int64_t>(seeded_below(kSampleSeed, s, length));
    sample[s] = std::min(magnitude_bits(x[position]), kNonFiniteMagnitude);
  }
  const double mean = static_cast<double>(k) * kSampleSize / static_cast<double>(n);
  const auto rank = static_cast<int64_t>(std::ceil(1.1 * mean + 3.0 * std::sqrt(mean) + 1.0));
  if (rank >= kSampleSize) {
    *expected = n;
    return 0;
  }
  std::nth_element(sample.begin(), sample.begin() + (rank - 1), sample.end(), std::greater<>());
  *expected = static_cast<int64_t>(std::ceil(static_cast<double>(rank) * n / kSampleSize));
  return sample[rank - 1];
}

}  // namespace

int64_t approx_min_kept(int64_t k) {
  return static_cast<int64_t>(std::ceil(kApproxLowerBound * k));
}

void select_top_k_full(const float* x, int64_t n, int64_t k, TopKSelection* out) {
  *out = TopKSelection();
  out->nonfinite = first_nonfinite(x, n);
  k = std::min(k, n);
  if (k <= 0 || out->nonfinite >= 0) return;
  auto magnitudes = std::make_unique_for_overwrite<uint32_t[]>(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) magnitudes[i] = magnitude_bits(x[i]);
  std::nth_element(magnitudes.get(), magnitudes.get() + (k - 1), magnitudes.get() + n,
                   std::greater<>());
  const uint32_t weakest = magnitudes[k - 1];
  magnitudes.reset();
  int64_t ties_left = k - count_magnitude_at_least(x, n, weakest + 1);
  out->indices = std::make_unique_for_overwrite<int64_t[]>(static_cast<size_t>(k));
  out->values = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t m = magnitude_bits(x[i]);
    if (m > weakest || (m == weakest && ties_left-- > 0)) {
      out->indices[out->size] = i;
      out->values[out->size] = x[i];
      ++out->size;
    }
  }
}

void select_top_k(const float* x, int64_t n, int64_t k, TopKMode mode, TopKSelection* out,
                  TopKStats* stats, int threads) {
  k = std::clamp<int64_t>(k, 0, n);
  // The sample pays only when the tensor is much larger than it and k is a small fraction.
  if (k == 0 || n < 4 * kSampleSize || k > n / 16) {
    if (stats != nullptr) *stats = TopKStats();
    select_top_k_full(x, n, k, out);
    return;
  }
  int64_t expected = 0;
  const uint32_t threshold = sampled_threshold(x, n, k, &expected);
  select_top_k_above(x, n, k, mode, threshold, expected, out, stats, threads);
}

namespace {

// What select_top_k_above() and select_top_k_above_sum() do once the collecting pass is over:
// the best k of the candidates, or the full strategy on x when too few passed.
void finish_selection(const float* x, int64_t n, int64_t k, TopKMode mode, int64_t bad,
                      Candidates* c, TopKSelection* out, TopKStats* stats) {
  if (bad < 0 && c->kept.size >= k) {
    keep_best(c, k);
  } else if (bad < 0 && (mode == TopKMode::kExact || c->kept.size < approx_min_kept(k))) {
    stats->fell_back = true;
    select_top_k_full(x, n, k, out);
    return;
  }
  *out = std::move(c->kept);
  out->nonfinite = bad;
  if (bad >= 0) out->size = 0;
}

}  // namespace

void select_top_k_above(const float* x, int64_t n, int64_t k, TopKMode mode, uint32_t threshold,
                        int64_t expected, TopKSelection* out, TopKStats* stats, int threads) {
  TopKStats local;
  if (stats == nullptr) stats = &local;
  *stats = TopKStats();
  stats->sampled = true;
  stats->threshold = threshold = std::min(threshold, kNonFiniteMagnitude);
  k = std::clamp<int64_t>(k, 1, n);
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock;
  const int ranges =
      static_cast<int>(std::clamp<int64_t>(blocks / kMinBlocksPerThread, 1, std::max(threads, 1)));
  Candidates c(0);
  const int64_t bad = collect_ranges(x, n, k, threshold, expected, ranges, &c, stats);
  finish_selection(x, n, k, mode, bad, &c, out, stats);
}

void select_top_k_above_sum(const float* x, const float* r, float* sum, int64_t n, int64_t k,
                            TopKMode mode, uint32_t threshold, int64_t expected,
                            TopKSelection* out) {
  // Chunks of 16 KiB: written, then scanned while they are still in the core's cache.
  constexpr int64_t kChunk = 4096;  // a multiple of kScanBlock
  TopKStats stats;
  threshold = std::min(threshold, kNonFiniteMagnitude);
  k = std::clamp<int64_t>(k, 1, n);
  Candidates c(candidate_slots(n, k, expected));
  int64_t bad = -1;
  for (int64_t begin = 0; begin < n && bad < 0; begin += kChunk) {
    const int64_t end = std::min(n, begin + kChunk);
    if (r != nullptr) {
      for (int64_t i = begin; i < end; ++i) sum[i] = x[i] + r[i];
    } else {
      for (int64_t i = begin; i < end; ++i) sum[i] = x[i] + 0.0f;
    }
    bad = collect(sum, begin, end, k, threshold, &c, &stats.compactions);
  }
  finish_selection(sum, n, k, mode, bad, &c, out, &stats);
}

}  // namespace tidegate
