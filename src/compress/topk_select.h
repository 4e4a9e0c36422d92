// Top-k selection by magnitude for the top-k codec: which k elements of a float32 tensor have
// the largest |x|, ties broken by the lower index, so that the choice is a pure function of the
// tensor and every rank would make the same one.
//
// Two strategies, both O(n):
//  - full: nth_element over a copy of all magnitudes finds the k-th largest, one more pass
//    collects the winners. Simple and exact; costs 4n bytes of scratch and several passes.
//    Used for small tensors and large k (k > n/16), and as the fallback of the sampled strategy.
//  - sampled (as DGC, Lin et al. 2018, but exact): a stratified sample of 16 Ki magnitudes
//    estimates a threshold a little below the k-th largest (about 1.1 k + 3 sigma elements
//    pass it); one vectorised pass collects every element at or above it, in index order, into
//    a buffer of about twice that (per thread, when threads split the pass); if it fills,
//    it is compacted to its best k and the threshold rises to just above the k-th (later
//    elements have higher indices, so they must beat it strictly). When at least k elements
//    passed, the best k of the buffer ARE the tensor's top k (every element left out is beaten
//    by k others), so the result is exact after one read of the tensor.
// When fewer than k elements pass the sampled threshold (rare: the margin is three standard
// deviations of the sample), the buffer holds the exact top-c for some c < k. Exact mode then
// falls back to the full strategy; approximate mode keeps those c when c >= ceil(0.8 k) (DGC's
// lower bound), so it reads the tensor once in that case too.
//
// Every non-finite element has a magnitude above every threshold, so every NaN and infinity is
// seen by the collecting pass: the first one ends the selection (TopKSelection::nonfinite).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tidegate {

enum class TopKMode : uint8_t { kExact = 0, kApprox = 1 };

// The fewest elements approximate mode keeps: ceil(0.8 k).
int64_t approx_min_kept(int64_t k);

// The kept elements in ascending index order; values are copied bit-exactly from the input.
// Plain arrays rather than vectors: the selection hands over its working buffers without a
// copy or a zero-fill of memory it is about to overwrite.
struct TopKSelection {
  std::unique_ptr<int64_t[]> indices;  // [0, size)
  std::unique_ptr<float[]> values;     // [0, size)
  int64_t size = 0;
  int64_t nonfinite = -1;  // >= 0: the first NaN/Inf element; then nothing was selected

  // Copies, for tests and tools.
  std::vector<int64_t> index_list() const {
    return std::vector<int64_t>(indices.get(), indices.get() + size);
  }
  std::vector<float> value_list() const {
    return std::vector<float>(values.get(), values.get() + size);
  }
};

// How a selection went, for tests and benchmarks.
struct TopKStats {
  bool sampled = false;     // the sampled strategy ran
  bool fell_back = false;   // it fell back to the full strategy
  int64_t compactions = 0;  // buffer compactions during the collecting pass
  uint32_t threshold = 0;   // sampled threshold (magnitude bits)
};

// Selects the top min(k, n) of x[0, n) (exact), or the exact top k' for some
// approx_min_kept(k) <= k' <= k (approx). k >= 0. With k == 0 it only checks for non-finite
// values. When x holds a NaN or infinity, out->nonfinite is the first one's index.
// threads > 1 splits the collecting pass over up to that many threads (1 Mi elements or more
// each); the result is the same for any thread count.
void select_top_k(const float* x, int64_t n, int64_t k, TopKMode mode, TopKSelection* out,
                  TopKStats* stats = nullptr, int threads = 1);

// The sampled strategy's collecting pass from a given threshold (magnitude bits, clamped to
// +Inf's) with `expected` elements expected at or above it; select_top_k() estimates both.
// Tests use it to force the shortfall paths. n >= 1, 1 <= k <= n.
void select_top_k_above(const float* x, int64_t n, int64_t k, TopKMode mode, uint32_t threshold,
                        int64_t expected, TopKSelection* out, TopKStats* stats = nullptr,
                        int threads = 1);

// select_top_k_above() of s = x + r (r may be null: s = x + 0.0, so -0.0 becomes +0.0), which it
// writes into sum[0, n) as it goes: each chunk of s is computed and scanned while it is in the
// cache, so error feedback's compensation and the selection read the tensor once between them.
// When s holds a NaN or infinity, out->nonfinite is the first one's index (sum is then written
// up to its chunk only). Single-threaded. n >= 1, 1 <= k <= n.
void select_top_k_above_sum(const float* x, const float* r, float* sum, int64_t n, int64_t k,
                            TopKMode mode, uint32_t threshold, int64_t expected,
                            TopKSelection* out);

// The full strategy alone (the reference the sampled one must match; also used by tests).
void select_top_k_full(const float* x, int64_t n, int64_t k, TopKSelection* out);

}  // namespace tidegate
