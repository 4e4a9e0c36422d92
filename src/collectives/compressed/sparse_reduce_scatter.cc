// Balanced sparse reduce-scatter + allgather (the SparCML / Ok-Topk / Zen family) for the
// sparsifiers (top-k, threshold, random-k). The index space is split into P regions by
// striding: element i belongs to region i mod P, at place i div P. Striding is a hash that
// spreads every contiguous run of hot indices (one layer's gradient, a batch of embedding rows)
// evenly over the owners, so no rank receives the hot region alone, and it needs no agreement
// beyond P.
//
//   1. every rank selects its entries (the codec's encoding of input + sender residual, error
//      feedback on what it leaves out), cuts them into the P regions and sends region r, a
//      sparse payload of region-local indices, to rank r;
//   2. the owner of a region decode-adds the P region payloads (its own included) into a
//      float32 region in rank order and divides by P for AVG;
//   3. the density switch: the owner encodes its merged region as index+value pairs, a bitmap
//      plus values, or dense floats, whichever is smallest (sparse_payload.h), and sends it to
//      every rank; every rank decodes every region into the output.
//
// Volume per rank, with k the entries a rank selects, c = index bits + 32 the bits of an entry,
// and m_r <= min(P k / P, n / P) = min(k, n/P) the entries of a merged region (the worst case,
// no two ranks selecting the same index, makes m_r = k):
//   out = (P-1)/P k c/8 (scatter) + (P-1) min(m_r c/8, 4 n/P, n/(8P) + 4 m_r) (gather)
// and the same in. Against the allgather of payloads ((P-1) k c/8), it wins when the ranks'
// selections overlap (m_r < k) or when merged regions turn dense (k > n/P); with disjoint sparse
// selections the allgather moves less.
#include <algorithm>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/compressed/compressed_kit.h"
#include "compress/randomk.h"
#include "compress/sparse_payload.h"
#include "compress/topk.h"

namespace tidegate {

namespace {

constexpr int kScatterTag = 0;
constexpr int kGatherTag = 1;

// The most entries one rank's encoding keeps of n (threshold: no bound but n).
int64_t max_kept(const Codec& codec, int64_t n) {
  switch (codec.id()) {
    case CodecId::kTopK:
      return static_cast<const TopKCodec&>(codec).k_for(n);
    case CodecId::kRandomK:
      return static_cast<const RandomKCodec&>(codec).k_for(n);
    default:
      return n;
  }
}

class SparseReduceScatterTask : public CollectiveTask {
 public:
  SparseReduceScatterTask(const TaskContext& context, const CompressedOp& op,
                          const WireHeader& header)
      : messenger_(context, header), op_(op), inbox_(&op.state->buffers()) {}

  const char* algorithm() const override { return "sparse_reduce_scatter"; }

  Status start() override {
    if (op_.error_feedback) TG_RETURN_IF_ERROR(check_finite_input(op_));
    const int64_t n = op_.count();
    BufferPool& pool = op_.state->buffers();
    PooledBuffer scratch = pool.take_floats(n), sent = pool.take_floats(n);
    const float* compensated = nullptr;
    float* residual = nullptr;
    TG_RETURN_IF_ERROR(load_compensated(op_, 0, n, scratch.floats(), &compensated, &residual));
    PooledBuffer payload;
    TG_RETURN_IF_ERROR(encode_whole(op_, float_view(compensated, n),
                                    encoding_seed(op_, 0, /*per_rank=*/true), &payload));
    // What the encoding keeps, as a dense tensor (zeros elsewhere): the sender's own view.
    TG_RETURN_IF_ERROR(
        op_.codec->decode(payload.data(), payload.size, float_view(sent.floats(), n)));
    if (residual != nullptr) update_residual(residual, compensated, sent.floats(), n);
    TG_RETURN_IF_ERROR(write_regions(sent.floats()));

    const int64_t kept = max_kept(*op_.codec, n);
    for (int step = 1; step < op_.size; ++step) {
      const int from = (op_.rank - step + op_.size) % op_.size;
      const int64_t mine = region_length(op_.rank);
      size_t index = 0;
      TG_RETURN_IF_ERROR(inbox_.receive(messenger_, from, 0,
                                        sparse_payload_bound(mine, std::min(kept, mine)),
                                        kScatterTag, &index));
      const int64_t theirs = region_length(from);
      TG_RETURN_IF_ERROR(inbox_.receive(messenger_, from, 1, sparse_payload_bound(theirs, theirs),
                                        kGatherTag, &index));
    }
    for (int step = 1; step < op_.size; ++step) {
      const int to = (op_.rank + step) % op_.size;
      TG_RETURN_IF_ERROR(outbox_.send(messenger_, to, 0, regions_[to].data(), regions_[to].size));
    }
    merged_region_ = false;
    return Status::ok();
  }

  Status advance(bool* done) override {
    *done = false;
    std::vector<size_t> arrived;
    TG_RETURN_IF_ERROR(inbox_.poll(messenger_, &arrived));
    for (size_t index : arrived) {
      if (inbox_.message(index).tag == kScatterTag) ++scattered_in_;
    }
    if (!merged_region_ && scattered_in_ == op_.size - 1) {
      TG_RETURN_IF_ERROR(merge_own_region());
      merged_region_ = true;
    }
    bool sent = false;
    TG_RETURN_IF_ERROR(outbox_.all_sent(messenger_, &sent));
    if (!sent || !merged_region_ || !inbox_.all_arrived()) return Status::ok();
    TG_RETURN_IF_ERROR(assemble_output());
    *done = true;
    return Status::ok();
  }

 private:
  int64_t region_length(int r) const {
    const int64_t n = op_.count();
    return n > r ? (n - r + op_.size - 1) / op_.size : 0;
  }

  // Region r of the kept entries (sent[r], sent[r + P], ...) as a sparse payload with
  // region-local indices.
  Status write_regions(const float* sent) {
    regions_.resize(static_cast<size_t>(op_.size));
    std::vector<int64_t> indices;
    std::vector<float> values;
    for (int r = 0; r < op_.size; ++r) {
      indices.clear();
      values.clear();
      const int64_t length = region_length(r);
      for (int64_t j = 0; j < length; ++j) {
        const float v = sent[j * op_.size + r];
        if (v != 0.0f) {
          indices.push_back(j);
          values.push_back(v);
        }
      }
      const int64_t k = static_cast<int64_t>(indices.size());
      const size_t bound = sparse_payload_bound(length, k);
      regions_[r] = op_.state->buffers().take(bound);
      TG_RETURN_IF_ERROR(write_sparse_payload(op_.codec->id(), TIDEGATE_FLOAT32, 0, length,
                                              indices.data(), values.data(), k, regions_[r].data(),
                                              bound, &regions_[r].size));
    }
    return Status::ok();
  }

  Status decode_region(int from, const uint8_t* payload, size_t bytes, float* region,
                       int64_t length, bool add) const {
    Status st =
        decode_sparse_payload(op_.codec->id(), 0, payload, bytes, float_view(region, length),
                              add ? SparseDecode::kAdd : SparseDecode::kOverwrite);
    if (!st.is_ok()) {
      return Status(st.code(), "sparse_reduce_scatter: rank " + std::to_string(from) +
                                   "'s region payload does not decode: " + st.message());
    }
    return Status::ok();
  }

  // Step 2 and 3 for this rank's region: the sum in rank order, then its densest-fitting
  // encoding, sent to every rank.
  Status merge_own_region() {
    const int64_t length = region_length(op_.rank);
    std::vector<const Inbox::Message*> by_rank(static_cast<size_t>(op_.size), nullptr);
    for (size_t i = 0; i < inbox_.size(); ++i) {
      const Inbox::Message& m = inbox_.message(i);
      if (m.tag == kScatterTag) by_rank[m.peer] = &m;
    }
    std::vector<float> sum(static_cast<size_t>(length), 0.0f);
    for (int r = 0; r < op_.size; ++r) {
      const uint8_t* payload = r == op_.rank ? regions_[r].data() : by_rank[r]->buffer.data();
      const size_t bytes = r == op_.rank ? regions_[r].size : by_rank[r]->bytes;
      TG_RETURN_IF_ERROR(decode_region(r, payload, bytes, sum.data(), length, true));
    }
    std::vector<int64_t> indices;
    std::vector<float> values;
    const float ranks = static_cast<float>(op_.size);
    for (int64_t j = 0; j < length; ++j) {
      const float v = op_.average ? sum[j] / ranks : sum[j];
      if (v != 0.0f) {
        indices.push_back(j);
        values.push_back(v);
      }
    }
    const int64_t k = static_cast<int64_t>(indices.size());
    const size_t bound = sparse_payload_bound(length, k);
    merged_ = op_.state->buffers().take(bound);
    TG_RETURN_IF_ERROR(write_sparse_payload(op_.codec->id(), TIDEGATE_FLOAT32, 0, length,
                                            indices.data(), values.data(), k, merged_.data(), bound,
                                            &merged_.size));
    for (int step = 1; step < op_.size; ++step) {
      const int to = (op_.rank + step) % op_.size;
      TG_RETURN_IF_ERROR(outbox_.send(messenger_, to, 1, merged_.data(), merged_.size));
    }
    return Status::ok();
  }

  // Every merged region, decoded from the bytes every rank holds, into its strided places.
  Status assemble_output() {
    const int64_t n = op_.count();
    PooledBuffer result_buffer = op_.state->buffers().take_floats(n);
    PooledBuffer region_buffer = op_.state->buffers().take_floats(region_length(0));
    float* result = result_buffer.floats();
    float* region = region_buffer.floats();
    for (int r = 0; r < op_.size; ++r) {
      const uint8_t* payload = merged_.data();
      size_t bytes = merged_.size;
      if (r != op_.rank) {
        for (size_t i = 0; i < inbox_.size(); ++i) {
          const Inbox::Message& m = inbox_.message(i);
          if (m.tag == kGatherTag && m.peer == r) {
            payload = m.buffer.data();
            bytes = m.bytes;
          }
        }
      }
      const int64_t length = region_length(r);
      TG_RETURN_IF_ERROR(decode_region(r, payload, bytes, region, length, false));
      for (int64_t j = 0; j < length; ++j) result[j * op_.size + r] = region[j];
    }
    store_result(op_, result, 0, n);
    return Status::ok();
  }

  Messenger messenger_;
  CompressedOp op_;
  std::vector<PooledBuffer> regions_;  // this rank's entries, per region
  PooledBuffer merged_;                // this rank's merged region, encoded
  Inbox inbox_;
  Outbox outbox_;
  int scattered_in_ = 0;
  bool merged_region_ = false;
};

}  // namespace

Status make_allreduce_sparse_reduce_scatter(const TaskContext& context, const CollectiveArgs& args,
                                            std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  *task = std::make_unique<SparseReduceScatterTask>(context, op, op_identity(context, args));
  return Status::ok();
}

// The worst case (no overlap between ranks' selections): each region merges k entries; the
// gather sends them sparse or dense, whichever is smaller.
double allreduce_sparse_reduce_scatter_cost_us(const CostTerms& t, double n, int64_t p) {
  const double frac = cost::spread(p);
  const double scatter = n * t.payload_ratio * frac;
  const double merged = std::min(n * t.payload_ratio, n / static_cast<double>(p));
  return 2 * t.alpha + (scatter + static_cast<double>(p - 1) * merged) * t.beta +
         n * (t.encode + 3 * t.decode);
}

}  // namespace tidegate
