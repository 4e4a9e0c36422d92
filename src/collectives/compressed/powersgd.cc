// PowerSGD (Vogels, Karimireddy, Jaggi 2019) as a collective: a rank-r approximation of the
// rows x cols gradient M (the input's 2-D shape; input + sender residual under error feedback)
// by one warm-started power-iteration step, with two small dense allreduces whose algorithm the
// plan picks for their size:
//   P = M Q            allreduce(P, SUM)      orthogonalise P (every rank the same bytes)
//   Q = M^T P          allreduce(Q, op)       result = P Q^T, Q kept for the next step
// Q starts from a draw of the job seed and the key (the same on every rank) and is kept per key
// (CompressionState). Error feedback, as in the paper and PyTorch's hook: each rank keeps
// M - result/P (the averaged result), so the sum of the residuals is what the approximation left
// out of the sum. When r (rows + cols) >= rows cols (or the tensor has no 2-D shape) the factors
// would not be smaller than the matrix, and M itself is allreduced dense.
//
// Volume per rank: two ring allreduces of r (rows + cols) floats: 2 (P-1)/P 4 r (rows + cols).
#include <algorithm>
#include <cmath>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/compressed/compressed_kit.h"
#include "compress/float_io.h"
#include "compress/powersgd.h"

namespace tidegate {

namespace {

class PowerSgdTask : public CollectiveTask {
 public:
  PowerSgdTask(const TaskContext& context, const CollectiveArgs& args, const CompressedOp& op)
      : context_(context), args_(args), op_(op) {}

  const char* algorithm() const override { return "powersgd"; }

  Status start() override {
    TG_RETURN_IF_ERROR(check_finite_input(op_));  // M is multiplied, never encoded
    const int64_t n = op_.count();
    rows_ = op_.input.rows;
    cols_ = op_.input.cols;
    const int wanted = static_cast<const PowerSgdCodec&>(*op_.codec).config().rank;
    rank_ = rows_ > 0 && cols_ > 0 ? powersgd_effective_rank(wanted, rows_, cols_) : 0;
    m_buffer_ = op_.state->buffers().take_floats(n);
    const float* values = nullptr;
    TG_RETURN_IF_ERROR(load_compensated(op_, 0, n, m_buffer_.floats(), &values, &residual_));
    m_ = values;
    dense_ = rank_ == 0 || static_cast<int64_t>(rank_) * (rows_ + cols_) >= rows_ * cols_;
    // A float32 output takes the result directly (no copy of the whole matrix at the end).
    if (op_.output.dtype == TIDEGATE_FLOAT32) {
      result_ = static_cast<float*>(op_.output.data);
    } else {
      result_buffer_ = op_.state->buffers().take_floats(n);
      result_ = result_buffer_.floats();
    }
    if (dense_) {
      if (result_ != m_) std::copy(m_, m_ + n, result_);  // in place: M is the output already
      return start_reduce(result_, n, args_.reduce_op, 1);
    }
    PowerSgdState& state = op_.state->powersgd(op_.key);
    state.prepare(cols_, rank_, encoding_seed(op_, 0, /*per_rank=*/false));
    p_.resize(static_cast<size_t>(rows_ * rank_));
    powersgd_compute_p(m_, rows_, cols_, state.q(), rank_, p_.data());
    return start_reduce(p_.data(), rows_ * rank_, TIDEGATE_SUM, 1);
  }

  Status advance(bool* done) override {
    *done = false;
    bool finished = false;
    TG_RETURN_IF_ERROR(reduce_->advance(&finished));
    if (!finished) return Status::ok();
    if (dense_) return finish_dense(done);
    if (step_ == 1) {
      // Every rank holds the same summed P: every rank orthogonalises the same bytes.
      if (first_nonfinite(p_.data(), static_cast<int64_t>(p_.size())) >= 0) {
        return invalid_argument("powersgd: P = M Q overflowed float32 (gradient too large)");
      }
      powersgd_orthogonalize(p_.data(), rows_, rank_);
      q_.resize(static_cast<size_t>(cols_ * rank_));
      powersgd_compute_q(m_, rows_, cols_, p_.data(), rank_, q_.data());
      return start_reduce(q_.data(), cols_ * rank_, args_.reduce_op, 2);
    }
    if (first_nonfinite(q_.data(), static_cast<int64_t>(q_.size())) >= 0) {
      return invalid_argument("powersgd: Q = M^T P overflowed float32 (gradient too large)");
    }
    PowerSgdState& state = op_.state->powersgd(op_.key);
    std::copy(q_.begin(), q_.end(), state.q());  // the warm start of the next step
    // Block by block of rows: each block's residual is taken while its result is in cache.
    for (int64_t first = 0; first < rows_; first += row_block()) {
      const int64_t count = std::min(row_block(), rows_ - first);
      powersgd_reconstruct_rows(p_.data(), q_.data(), rows_, cols_, rank_, first, count, result_);
      if (residual_ != nullptr) keep_residual(first * cols_, count * cols_);
    }
    finish_result();
    *done = true;
    return Status::ok();
  }

 private:
  Status start_reduce(float* buffer, int64_t n, tidegate_reduce_op_t op, int step) {
    step_ = step;
    TG_RETURN_IF_ERROR(make_sub_allreduce(context_, args_, buffer, n, op, step, &reduce_));
    return reduce_->start();
  }

  // Rows of about 256 KiB: a block's result and M stay in cache for its residual.
  int64_t row_block() const { return std::max<int64_t>(1, (int64_t{1} << 16) / cols_); }

  // residual = M - (the averaged result) over [first, first + n): for SUM the result is divided
  // by P first.
  void keep_residual(int64_t first, int64_t n) {
    const float ranks = static_cast<float>(op_.size);
    for (int64_t i = first; i < first + n; ++i) {
      residual_[i] = m_[i] - (op_.average ? result_[i] : result_[i] / ranks);
    }
  }

  // A result computed in scratch (an output that is not float32) is converted into the output.
  void finish_result() {
    if (result_ != op_.output.data) store_result(op_, result_, 0, op_.count());
  }

  Status finish_dense(bool* done) {
    // Sent whole: nothing is left out.
    if (residual_ != nullptr) std::fill(residual_, residual_ + op_.count(), 0.0f);
    finish_result();
    *done = true;
    return Status::ok();
  }

  TaskContext context_;
  CollectiveArgs args_;
  CompressedOp op_;
  int64_t rows_ = 0, cols_ = 0;
  int rank_ = 0;
  bool dense_ = false;
  int step_ = 0;
  float* residual_ = nullptr;
  PooledBuffer m_buffer_, result_buffer_;
  const float* m_ = nullptr;  // M: the input, or input + residual in m_buffer_
  float* result_ = nullptr;   // in result_buffer_
  std::vector<float> p_, q_;
  std::unique_ptr<CollectiveTask> reduce_;
};

}  // namespace

Status make_allreduce_powersgd(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  if (op.codec->id() != CodecId::kPowerSgd) {
    return unsupported("the powersgd algorithm needs the powersgd codec, not " + op.codec->spec());
  }
  *task = std::make_unique<PowerSgdTask>(context, args, op);
  return Status::ok();
}

// Two ring allreduces of the factors (payload_ratio ~ r (rows + cols) / (rows cols)) and the
// three passes over M (P = M Q, Q = M^T P, P Q^T).
double allreduce_powersgd_cost_us(const CostTerms& t, double n, int64_t p) {
  const double factors = n * t.payload_ratio;
  const double scatter = cost::ring_reduce_scatter(t, factors / 2, p);
  const double one = (scatter < 0 ? 0 : scatter) + cost::ring_allgather(t, factors / 2, p);
  return 2 * one + n * (t.encode + t.decode);
}

}  // namespace tidegate
