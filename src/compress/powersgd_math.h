// The per-tensor mathematics of PowerSGD (Vogels, Karimireddy, Jaggi 2019): a rank-r
// approximation M ~ P Q^T of a rows x cols gradient matrix by one step of subspace (power)
// iteration, warm-started from the previous step's Q.
//
// One step, as the distributed version will run it (the reductions come with the collectives):
//   1. prepare:       Q from the state (warm start), or drawn from the seed the first time
//   2. compute_p:     P = M Q                       (rows x r)
//   3. allreduce(P)   -- sum over ranks; every rank then holds the same P
//   4. orthogonalize: P <- orthonormal basis of span(P)
//   5. compute_q:     Q = M^T P                     (cols x r)
//   6. allreduce(Q)   -- sum (and divide by the world size for a mean)
//   7. reconstruct:   M' = P Q^T; Q stays in the state for the next step
// A single node skips 3 and 6. Summing P before orthogonalising is what makes the result the
// same on every rank: each rank orthogonalises the same bytes with the same code.
//
// Layouts: M is row-major (the tensor as it lies in memory). P (rows x r) and Q (cols x r) are
// column-major, each column contiguous, because every kernel walks a column at a time.
//
// Why hand-written rather than BLAS: r is 1 to a few dozen, so every product is a memory-bound
// pass over M with r running sums, which a plain loop does at memory speed; and the summation
// order must be fixed for bitwise-identical results on every rank, which a threaded BLAS
// (whose blocking depends on the thread count) does not promise. The orthogonalisation is on
// rows x r numbers only and runs in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tidegate {

inline constexpr int kPowerSgdMaxRank = 64;

// The rank actually used for a rows x cols matrix: min(rank, rows, cols).
int powersgd_effective_rank(int rank, int64_t rows, int64_t cols);

// P = M Q. m: rows x cols row-major; q: cols x rank column-major; p: rows x rank column-major.
void powersgd_compute_p(const float* m, int64_t rows, int64_t cols, const float* q, int rank,
                        float* p);

// Makes P's columns orthonormal in place: modified Gram-Schmidt in double, each column
// orthogonalised twice against the earlier ones ("twice is enough", Giraud et al. 2005), so
// orthogonality holds to float precision even for nearly dependent columns. A column whose
// remaining norm is zero or below 1e-4 of its original norm (a direction that is only
// rounding noise, as when M has rank < r) becomes exactly zero, deterministically. Returns
// the number of columns zeroed. P must be finite.
int powersgd_orthogonalize(float* p, int64_t rows, int rank);

// Q = M^T P. q: cols x rank column-major (overwritten).
void powersgd_compute_q(const float* m, int64_t rows, int64_t cols, const float* p, int rank,
                        float* q);

// Rows [first_row, first_row + row_count) of out = P Q^T (overwritten; out is the whole rows x
// cols matrix, row-major): the same bits as powersgd_reconstruct gives them, so that a caller
// can finish each block of rows while it is in cache.
void powersgd_reconstruct_rows(const float* p, const float* q, int64_t rows, int64_t cols, int rank,
                               int64_t first_row, int64_t row_count, float* out);

// out = P Q^T (add = false) or out += P Q^T (add = true); out is rows x cols row-major.
void powersgd_reconstruct(const float* p, const float* q, int64_t rows, int64_t cols, int rank,
                          float* out, bool add);

// Column c of Q drawn from the seed: uniform in [-1, 1), a pure function of (seed, c, index),
// so every rank draws the same Q.
void powersgd_draw_q_column(uint64_t seed, int64_t cols, int c, float* column);

// The state PowerSGD keeps per tensor between steps: Q (cols x rank, column-major). The
// collective layer keys it by tensor key, like the error-feedback residual. Not thread-safe;
// one state belongs to one tensor's stream of steps.
class PowerSgdState {
 public:
  // Makes Q ready for a step on a matrix with `cols` columns at `rank` (already effective):
  // drawn from the seed when empty or when the shape changed, and any all-zero column (left by
  // a zero gradient or a dependent direction) redrawn, so a rank lost once is not lost forever.
  // Q is identical on every rank before the call, so the redraw decisions are too.
  void prepare(int64_t cols, int rank, uint64_t seed);
  void clear() { q_.clear(), cols_ = 0, rank_ = 0; }

  bool empty() const { return q_.empty(); }
  int64_t cols() const { return cols_; }
  int rank() const { return rank_; }
  float* q() { return q_.data(); }
  const float* q() const { return q_.data(); }

  // Checkpointing: "PSGQ" u32 | version u8 | 3 reserved | rank u32 | cols i64 | Q floats,
  // little-endian. load() refuses (INVALID_ARGUMENT) anything else and leaves the state as it was.
  std::vector<uint8_t> save() const;
  Status load(const uint8_t* data, size_t bytes);

 private:
  std::vector<float> q_;
  int64_t cols_ = 0;
  int rank_ = 0;
};

// Steps 1, 2, 4 and 5 on one node: leaves P (rows x rank, column-major, resized) and the new
// Q in the state. m holds rows * cols floats; rank must already be effective. INVALID_ARGUMENT
// when M holds a NaN or infinity (the first one's index goes to *nonfinite_index when given,
// so the caller can name the element of its own tensor) or when P or Q overflowed float32.
Status powersgd_local_step(const float* m, int64_t rows, int64_t cols, int rank, uint64_t seed,
                           PowerSgdState* state, std::vector<float>* p,
                           int64_t* nonfinite_index = nullptr);

}  // namespace tidegate
