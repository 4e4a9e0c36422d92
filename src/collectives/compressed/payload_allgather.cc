// Compressed allreduce by allgather of payloads (the sparse allgather of SparCML and GRACE's
// default): every rank encodes its whole tensor once (with error feedback), sends the payload
// to every other rank and receives theirs; each rank then decode-adds all P payloads into a
// float32 sum in rank order, its own included, so every rank adds the same bytes in the same
// order and ends with the same bits. Any codec that decodes to a tensor works; it is the right
// algorithm for sparse payloads (top-k, threshold, random-k with per-rank indices), whose sum
// is denser than any one payload, so nothing is gained by re-encoding a sum.
//
// Volume per rank, with b the payload size of the whole tensor (top-k: k (index bits + 32) / 8
// bytes, or the bitmap or dense layout when smaller): (P - 1) b sent and (P - 1) b received, in
// one round: alpha + (P - 1) b beta, plus encode(n) + P decode_add(n).
#include <algorithm>
#include <memory>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/compressed/compressed_kit.h"

namespace tidegate {

namespace {

class PayloadAllgatherTask : public CollectiveTask {
 public:
  PayloadAllgatherTask(const TaskContext& context, const CompressedOp& op, const WireHeader& header)
      : messenger_(context, header), op_(op), inbox_(&op.state->buffers()) {}

  const char* algorithm() const override { return "allgather"; }

  Status start() override {
    TG_RETURN_IF_ERROR(encode_mine());
    const size_t bound = payload_bound(*op_.codec, op_.count());
    for (int step = 1; step < op_.size; ++step) {
      const int from = (op_.rank - step + op_.size) % op_.size;
      size_t index = 0;
      TG_RETURN_IF_ERROR(inbox_.receive(messenger_, from, 0, bound, from, &index));
    }
    for (int step = 1; step < op_.size; ++step) {
      const int to = (op_.rank + step) % op_.size;
      TG_RETURN_IF_ERROR(outbox_.send(messenger_, to, 0, mine_.data(), mine_.size));
    }
    return Status::ok();
  }

  Status advance(bool* done) override {
    *done = false;
    std::vector<size_t> arrived;
    TG_RETURN_IF_ERROR(inbox_.poll(messenger_, &arrived));
    bool sent = false;
    TG_RETURN_IF_ERROR(outbox_.all_sent(messenger_, &sent));
    if (!sent || !inbox_.all_arrived()) return Status::ok();
    TG_RETURN_IF_ERROR(sum_in_rank_order());
    *done = true;
    return Status::ok();
  }

 private:
  Status encode_mine() {
    const int64_t n = op_.count();
    const uint64_t seed = encoding_seed(op_, 0, /*per_rank=*/true);
    if (op_.error_feedback && op_.codec->decodes_sparse()) {
      return encode_whole_sparse_feedback(op_, seed, &mine_);
    }
    if (op_.error_feedback) TG_RETURN_IF_ERROR(check_finite_input(op_));
    BufferPool& pool = op_.state->buffers();
    PooledBuffer scratch = pool.take_floats(n);
    const float* compensated = nullptr;
    float* residual = nullptr;
    TG_RETURN_IF_ERROR(load_compensated(op_, 0, n, scratch.floats(), &compensated, &residual));
    TG_RETURN_IF_ERROR(encode_whole(op_, float_view(compensated, n), seed, &mine_));
    if (residual != nullptr) {
      PooledBuffer sent = pool.take_floats(n);
      TG_RETURN_IF_ERROR(op_.codec->decode(mine_.data(), mine_.size, float_view(sent.floats(), n)));
      update_residual(residual, compensated, sent.floats(), n);
    }
    return Status::ok();
  }

  Status sum_in_rank_order() {
    const int64_t n = op_.count();
    std::vector<const Inbox::Message*> by_rank(static_cast<size_t>(op_.size), nullptr);
    for (size_t i = 0; i < inbox_.size(); ++i) by_rank[inbox_.message(i).tag] = &inbox_.message(i);
    PooledBuffer scratch =
        op_.state->buffers().take_floats(op_.output.dtype == TIDEGATE_FLOAT32 ? 0 : n);
    float* sum = result_slot(op_, 0, scratch.floats());
    std::vector<PayloadSpan> payloads(static_cast<size_t>(op_.size));
    for (int r = 0; r < op_.size; ++r) {
      payloads[r] = r == op_.rank ? PayloadSpan{mine_.data(), mine_.size}
                                  : PayloadSpan{by_rank[r]->buffer.data(), by_rank[r]->bytes};
    }
    size_t failed = payloads.size();  // set only when a payload does not decode
    Status decoded =
        op_.codec->decode_sum(payloads.data(), payloads.size(), float_view(sum, n),
                              op_.average ? static_cast<float>(op_.size) : 1.0f, &failed);
    if (!decoded.is_ok()) {
      if (failed >= payloads.size()) return decoded;
      return Status(decoded.code(), "the payload of rank " + std::to_string(failed) +
                                        " does not decode: " + decoded.message());
    }
    finish_result(op_, sum, 0, n);
    return Status::ok();
  }

  Messenger messenger_;
  CompressedOp op_;
  PooledBuffer mine_;
  Inbox inbox_;
  Outbox outbox_;
};

}  // namespace

Status make_allreduce_payload_allgather(const TaskContext& context, const CollectiveArgs& args,
                                        std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  *task = std::make_unique<PayloadAllgatherTask>(context, op, op_identity(context, args));
  return Status::ok();
}

// One round of (P-1) payloads each way, then a decode-add of all P. The payload ratio of the
// codec is in terms.payload_ratio (payload bytes / dense bytes); n is the dense size.
double allreduce_payload_allgather_cost_us(const CostTerms& t, double n, int64_t p) {
  const double payload = n * t.payload_ratio;
  return t.alpha + static_cast<double>(p - 1) * payload * t.beta + t.encode * n +
         static_cast<double>(p) * t.decode * n;
}

}  // namespace tidegate
