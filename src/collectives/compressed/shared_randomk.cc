// Shared-index random-k: every rank draws the same k indices (random-k's strata, drawn from a
// seed of (job seed, tensor key, the key's step) that leaves the rank out), so no index needs to
// travel: the k values are reduced with a dense allreduce of k floats, whose algorithm the plan
// picks for that size, and scattered back (zeros elsewhere). With error feedback each rank keeps
// what it did not send. unbiased=1 scales each value by its stratum's length, as the codec does.
//
// Volume per rank: the dense allreduce of 4 k bytes (ring: 2 (P-1)/P 4k), no index at all.
#include <algorithm>
#include <cmath>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/compressed/compressed_kit.h"
#include "compress/float_io.h"
#include "compress/randomk.h"

namespace tidegate {

namespace {

class SharedRandomKTask : public CollectiveTask {
 public:
  SharedRandomKTask(const TaskContext& context, const CollectiveArgs& args, const CompressedOp& op)
      : context_(context), args_(args), op_(op) {}

  const char* algorithm() const override { return "shared_randomk"; }

  Status start() override {
    const auto& codec = static_cast<const RandomKCodec&>(*op_.codec);
    const int64_t n = op_.count();
    const int64_t k = std::min(codec.k_for(n), n);
    // With error feedback the residual accumulates the whole input (one pass) and gives up
    // what is sent; without it the values are read from the input where they lie.
    float* residual = nullptr;
    PooledBuffer scratch;
    const float* source = nullptr;
    if (op_.error_feedback) {
      TG_RETURN_IF_ERROR(check_finite_input(op_));  // before the residual changes
      TG_RETURN_IF_ERROR(op_.state->sender().float_residual(op_.key, n, &residual));
      store_floats_add(residual);
      source = residual;
    } else if (op_.input.dtype == TIDEGATE_FLOAT32) {
      source = static_cast<const float*>(op_.input.data);
    } else {
      scratch = op_.state->buffers().take_floats(n);
      load_floats(op_.input, 0, n, scratch.floats());
      source = scratch.floats();
    }
    indices_.resize(static_cast<size_t>(k));
    values_.resize(static_cast<size_t>(k));
    const uint64_t seed = encoding_seed(op_, 0, /*per_rank=*/false);  // the same on every rank
    for (int64_t j = 0; j < k; ++j) {
      int64_t stratum = 1;
      const int64_t i = k < n ? randomk_index(seed, j, k, n, &stratum) : j;
      const float scale = codec.config().unbiased && k < n ? static_cast<float>(stratum) : 1.0f;
      indices_[j] = i;
      values_[j] = source[i] * scale;
      if (!std::isfinite(values_[j])) {
        return invalid_argument("randomk: input element " + std::to_string(i) +
                                " is not finite (NaN or infinity cannot be compressed)");
      }
    }
    if (residual != nullptr) {
      for (int64_t j = 0; j < k; ++j) residual[indices_[j]] -= values_[j];
    }
    TG_RETURN_IF_ERROR(
        make_sub_allreduce(context_, args_, values_.data(), k, args_.reduce_op, 1, &reduce_));
    return reduce_->start();
  }

  Status advance(bool* done) override {
    TG_RETURN_IF_ERROR(reduce_->advance(done));
    if (!*done) return Status::ok();
    const int64_t n = op_.count();
    std::vector<float> result(static_cast<size_t>(n), 0.0f);
    for (size_t j = 0; j < indices_.size(); ++j)
      result[static_cast<size_t>(indices_[j])] = values_[j];
    store_result(op_, result.data(), 0, n);
    return Status::ok();
  }

 private:
  TaskContext context_;
  CollectiveArgs args_;
  CompressedOp op_;
  std::vector<int64_t> indices_;
  std::vector<float> values_;
  std::unique_ptr<CollectiveTask> reduce_;

  // residual += input (as float32), in blocks.
  void store_floats_add(float* residual) const {
    constexpr int64_t kBlock = 1 << 14;
    float block[kBlock];
    for (int64_t first = 0; first < op_.count(); first += kBlock) {
      const int64_t m = std::min(kBlock, op_.count() - first);
      const float* x = floats_at(op_.input, first, m, block);
      add_floats(x, m, residual + first);
    }
  }
};

}  // namespace

Status make_allreduce_shared_randomk(const TaskContext& context, const CollectiveArgs& args,
                                     std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  if (op.codec->id() != CodecId::kRandomK) {
    return unsupported("shared_randomk needs the randomk codec, not " + op.codec->spec());
  }
  *task = std::make_unique<SharedRandomKTask>(context, args, op);
  return Status::ok();
}

// The ring allreduce of the kept values (payload_ratio ~ k/n).
double allreduce_shared_randomk_cost_us(const CostTerms& t, double n, int64_t p) {
  const double kept = n * t.payload_ratio;
  const double scatter = cost::ring_reduce_scatter(t, kept, p);
  return (scatter < 0 ? 0 : scatter) + cost::ring_allgather(t, kept, p) + n * t.encode;
}

}  // namespace tidegate
