#include "compress/powersgd_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compress/float_io.h"
#include "compress/seeded_random.h"
#include "compress/simd.h"

namespace tidegate {
namespace {

constexpr uint32_t kStateMagic = 0x51475350;  // "PSGQ" little-endian
constexpr uint8_t kStateVersion = 1;
constexpr size_t kStateHeaderBytes = 4 + 1 + 3 + 4 + 8;
// Below this fraction of its original norm, what is left of a column after removing the
// earlier directions is rounding noise of the float inputs, not a direction of M.
constexpr double kDependentColumn = 1e-4;

// Columns handled together: r blocks of Q of this many floats stay in L1 while every row of
// M streams past them once, so M is read once from memory and Q never leaves the cache.
constexpr int64_t kColumnBlock = 16384;

// G dot products of a with the G vectors q + g * stride, in one pass over a. Each keeps 16
// independent running sums (one vector of GCC's vector extension: one AVX-512 register, two
// AVX2 or four SSE ones) combined in a fixed tree, so every clone gives the same bits on every
// rank without -ffast-math.
template <int G>
inline __attribute__((always_inline)) void dots(const float* a, const float* q, int64_t stride,
                                                int64_t n, float* out) {
  typedef float f32x16 __attribute__((vector_size(64)));
  f32x16 sums[G] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    f32x16 va;
    std::memcpy(&va, a + i, sizeof va);
    for (int g = 0; g < G; ++g) {
      f32x16 vq;
      std::memcpy(&vq, q + g * stride + i, sizeof vq);
      sums[g] += va * vq;
    }
  }
  for (int g = 0; g < G; ++g) {
    float s[16];
    std::memcpy(s, &sums[g], sizeof s);
    for (int width = 8; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) s[l] += s[l + width];
    }
    float tail = 0;
    for (int64_t j = i; j < n; ++j) tail += a[j] * q[g * stride + j];
    out[g] = s[0] + tail;
  }
}

// out[c] = a . (q + c * stride) over n elements, for c < rank, four columns per pass over a.
TG_VECTOR_CLONES void row_dots(const float* a, const float* q, int64_t stride, int64_t n, int rank,
                               float* out) {
  int c = 0;
  for (; c + 4 <= rank; c += 4) dots<4>(a, q + c * stride, stride, n, out + c);
  for (; c + 2 <= rank; c += 2) dots<2>(a, q + c * stride, stride, n, out + c);
  for (; c < rank; ++c) dots<1>(a, q + c * stride, stride, n, out + c);
}

// y += a * x
TG_VECTOR_CLONES void axpy(float a, const float* TG_RESTRICT x, float* TG_RESTRICT y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// y = a * x
TG_VECTOR_CLONES void scale(float a, const float* TG_RESTRICT x, float* TG_RESTRICT y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i];
}

double dot_double(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

int powersgd_effective_rank(int rank, int64_t rows, int64_t cols) {
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({rank, rows, cols})));
}

void powersgd_compute_p(const float* m, int64_t rows, int64_t cols, const float* q, int rank,
                        float* p) {
  std::fill(p, p + rows * rank, 0.0f);
  float partial[kPowerSgdMaxRank];
  // Block by block, each block's dot product added in column order: a fixed summation order.
  for (int64_t j = 0; j < cols; j += kColumnBlock) {
    const int64_t width = std::min(kColumnBlock, cols - j);
    for (int64_t i = 0; i < rows; ++i) {
      row_dots(m + i * cols + j, q + j, cols, width, rank, partial);
      for (int c = 0; c < rank; ++c) p[c * rows + i] += partial[c];
    }
  }
}

int powersgd_orthogonalize(float* p, int64_t rows, int rank) {
  std::vector<double> basis(static_cast<size_t>(rows) * static_cast<size_t>(rank));
  std::vector<bool> live(static_cast<size_t>(rank), false);
  int zeroed = 0;
  for (int c = 0; c < rank; ++c) {
    double* v = basis.data() + c * rows;
    for (int64_t i = 0; i < rows; ++i) v[i] = p[c * rows + i];
    const double original = std::sqrt(dot_double(v, v, rows));
    for (int pass = 0; pass < 2; ++pass) {
      for (int b = 0; b < c; ++b) {
        if (!live[b]) continue;
        const double* u = basis.data() + b * rows;
        const double projection = dot_double(u, v, rows);
        for (int64_t i = 0; i < rows; ++i) v[i] -= projection * u[i];
      }
    }
    const double norm = std::sqrt(dot_double(v, v, rows));
    live[c] = original > 0 && norm > kDependentColumn * original;
    const double scale = live[c] ? 1.0 / norm : 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      v[i] *= scale;
      p[c * rows + i] = static_cast<float>(v[i]);
    }
    zeroed += live[c] ? 0 : 1;
  }
  return zeroed;
}

void powersgd_compute_q(const float* m, int64_t rows, int64_t cols, const float* p, int rank,
                        float* q) {
  std::fill(q, q + cols * rank, 0.0f);
  for (int64_t j = 0; j < cols; j += kColumnBlock) {
    const int64_t width = std::min(kColumnBlock, cols - j);
    for (int64_t i = 0; i < rows; ++i) {
      const float* row = m + i * cols + j;
      for (int c = 0; c < rank; ++c) axpy(p[c * rows + i], row, q + c * cols + j, width);
    }
  }
}

void powersgd_reconstruct(const float* p, const float* q, int64_t rows, int64_t cols, int rank,
                          float* out, bool add) {
  if (rank == 0 && !add) std::fill(out, out + rows * cols, 0.0f);
  for (int64_t j = 0; j < cols; j += kColumnBlock) {
    const int64_t width = std::min(kColumnBlock, cols - j);
    for (int64_t i = 0; i < rows; ++i) {
      float* row = out + i * cols + j;
      for (int c = 0; c < rank; ++c) {
        if (c == 0 && !add) {
          scale(p[i], q + j, row, width);  // overwrite without clearing first
        } else {
          axpy(p[c * rows + i], q + c * cols + j, row, width);
        }
      }
    }
  }
}

void powersgd_reconstruct_rows(const float* p, const float* q, int64_t rows, int64_t cols, int rank,
                               int64_t first_row, int64_t row_count, float* out) {
  const int64_t end = first_row + row_count;
  if (rank == 0) std::fill(out + first_row * cols, out + end * cols, 0.0f);
  // Per element the same operations in the same order as powersgd_reconstruct (scale by
  // column 0, then axpy of columns 1..rank-1), only visited row block by row block.
  for (int64_t j = 0; j < cols; j += kColumnBlock) {
    const int64_t width = std::min(kColumnBlock, cols - j);
    for (int64_t i = first_row; i < end; ++i) {
      float* row = out + i * cols + j;
      for (int c = 0; c < rank; ++c) {
        if (c == 0) {
          scale(p[i], q + j, row, width);
        } else {
          axpy(p[c * rows + i], q + c * cols + j, row, width);
        }
      }
    }
  }
}

void powersgd_draw_q_column(uint64_t seed, int64_t cols, int c, float* column) {
  for (int64_t j = 0; j < cols; ++j) {
    column[j] =
        seeded_symmetric_float(seed, static_cast<uint64_t>(c) * static_cast<uint64_t>(cols) + j);
  }
}

void PowerSgdState::prepare(int64_t cols, int rank, uint64_t seed) {
  const bool fresh = q_.empty() || cols != cols_ || rank != rank_;
  if (fresh) {
    q_.assign(static_cast<size_t>(cols) * static_cast<size_t>(rank), 0.0f);
    cols_ = cols;
    rank_ = rank;
  }
  for (int c = 0; c < rank; ++c) {
    float* column = q_.data() + c * cols;
    if (fresh || std::all_of(column, column + cols, [](float v) { return v == 0.0f; })) {
      powersgd_draw_q_column(seed, cols, c, column);
    }
  }
}

std::vector<uint8_t> PowerSgdState::save() const {
  std::vector<uint8_t> bytes(kStateHeaderBytes + q_.size() * sizeof(float), 0);
  const auto rank = static_cast<uint32_t>(rank_);
  std::memcpy(bytes.data(), &kStateMagic, 4);
  bytes[4] = kStateVersion;
  std::memcpy(bytes.data() + 8, &rank, 4);
  std::memcpy(bytes.data() + 12, &cols_, 8);
  if (!q_.empty())
    std::memcpy(bytes.data() + kStateHeaderBytes, q_.data(), q_.size() * sizeof(float));
  return bytes;
}

Status PowerSgdState::load(const uint8_t* data, size_t bytes) {
  uint32_t magic = 0, rank = 0;
  int64_t cols = 0;
  TG_CHECK_ARG(
      data != nullptr && bytes >= kStateHeaderBytes,
      "powersgd state: " + std::to_string(bytes) + " bytes is too short for a saved state");
  std::memcpy(&magic, data, 4);
  std::memcpy(&rank, data + 8, 4);
  std::memcpy(&cols, data + 12, 8);
  TG_CHECK_ARG(
      magic == kStateMagic && data[4] == kStateVersion,
      "powersgd state: not a version-" + std::to_string(kStateVersion) + " PowerSGD state");
  TG_CHECK_ARG(rank <= kPowerSgdMaxRank && cols >= 0 && (rank == 0) == (cols == 0) &&
                   static_cast<uint64_t>(cols) <= (bytes - kStateHeaderBytes) / sizeof(float) &&
                   bytes - kStateHeaderBytes == static_cast<size_t>(cols) * rank * sizeof(float),
               "powersgd state: rank " + std::to_string(rank) + " x " + std::to_string(cols) +
                   " columns does not match its " + std::to_string(bytes) + " bytes");
  std::vector<float> q(static_cast<size_t>(cols) * rank);
  if (!q.empty()) std::memcpy(q.data(), data + kStateHeaderBytes, q.size() * sizeof(float));
  TG_CHECK_ARG(first_nonfinite(q.data(), static_cast<int64_t>(q.size())) < 0,
               "powersgd state: Q holds NaN or Inf");
  q_ = std::move(q);
  cols_ = cols;
  rank_ = static_cast<int>(rank);
  return Status::ok();
}

Status powersgd_local_step(const float* m, int64_t rows, int64_t cols, int rank, uint64_t seed,
                           PowerSgdState* state, std::vector<float>* p, int64_t* nonfinite_index) {
  state->prepare(cols, rank, seed);
  p->assign(static_cast<size_t>(rows) * static_cast<size_t>(rank), 0.0f);
  powersgd_compute_p(m, rows, cols, state->q(), rank, p->data());
  // A NaN or Inf anywhere in M reaches every entry of its row of P (x * 0 is NaN for x = Inf),
  // so checking the small P finds them without another pass over M.
  if (first_nonfinite(p->data(), static_cast<int64_t>(p->size())) >= 0) {
    const int64_t bad = first_nonfinite(m, rows * cols);
    if (bad >= 0) {
      if (nonfinite_index != nullptr) *nonfinite_index = bad;
      return nonfinite_input(CodecId::kPowerSgd, bad, m[bad]);
    }
    return invalid_argument(
        "powersgd codec: M Q overflowed float32; the gradient's magnitudes are near FLT_MAX "
        "(the residual was left unchanged)");
  }
  powersgd_orthogonalize(p->data(), rows, rank);
  powersgd_compute_q(m, rows, cols, p->data(), rank, state->q());
  if (first_nonfinite(state->q(), cols * rank) >= 0) {
    state->clear();  // never keep a poisoned warm start
    return invalid_argument(
        "powersgd codec: M^T P overflowed float32; the gradient's magnitudes are near FLT_MAX "
        "(the residual was left unchanged)");
  }
  return Status::ok();
}

}  // namespace tidegate
