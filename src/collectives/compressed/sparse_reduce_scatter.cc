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
//
// Memory passes per rank: the encoding's (with error feedback, encode_whole_sparse_feedback's
// compensation), then O(k) to deal the entries into regions, one pass over the n/P merged places
// and one over the n outputs, both in cache-sized blocks that take their entries from every
// payload's cursor (sparse_entries.h). Writing the strided regions one after another instead
// would pass over every output line P times.
#include <algorithm>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/compressed/compressed_kit.h"
#include "compress/randomk.h"
#include "compress/sparse_entries.h"
#include "compress/sparse_payload.h"
#include "compress/topk.h"

namespace tidegate {

namespace {

constexpr int kScatterTag = 0;
constexpr int kGatherTag = 1;
// Elements per block of the merge and of the assembly: 32 KiB, in the core's cache while the P
// payloads fill it.
constexpr int64_t kAssembleBlock = 8192;
// The sender parses its own payload, whatever flag bits its codec sets there.
constexpr uint8_t kAnyCodecFlags = 0xff;

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

// A rank's kept entries dealt into the P strided regions: element i is place i div P of region
// i mod P. Zeros (the dense layout's, or a dense decoding's) are not entries.
struct Regions {
  explicit Regions(int ranks)
      : p(ranks), indices(static_cast<size_t>(ranks)), values(static_cast<size_t>(ranks)) {}
  void deal(int64_t i, float v) {
    if (v == 0.0f) return;
    indices[static_cast<size_t>(i % p)].push_back(i / p);
    values[static_cast<size_t>(i % p)].push_back(v);
  }
  int64_t p;
  std::vector<std::vector<int64_t>> indices;  // per region, ascending places
  std::vector<std::vector<float>> values;
};

class SparseReduceScatterTask : public CollectiveTask {
 public:
  SparseReduceScatterTask(const TaskContext& context, const CompressedOp& op,
                          const WireHeader& header)
      : messenger_(context, header), op_(op), inbox_(&op.state->buffers()) {}

  const char* algorithm() const override { return "sparse_reduce_scatter"; }

  Status start() override {
    const int64_t n = op_.count();
    if (op_.codec->decodes_sparse()) {
      TG_RETURN_IF_ERROR(encode_entries());
    } else {
      TG_RETURN_IF_ERROR(encode_densely());
    }

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

  // Step 1 for the index-sending sparsifiers (top-k, threshold): the encoding (with error
  // feedback, the sender residual keeps what it leaves out, in O(k) after the compensation), its
  // entries dealt into the P regions as they come, in index order. No pass over the dense
  // tensor beyond the encoding's own.
  Status encode_entries() {
    const int64_t n = op_.count();
    const uint64_t seed = encoding_seed(op_, 0, /*per_rank=*/true);
    PooledBuffer payload;
    if (op_.error_feedback) {
      TG_RETURN_IF_ERROR(encode_whole_sparse_feedback(op_, seed, &payload));
    } else {
      BufferPool& pool = op_.state->buffers();
      PooledBuffer scratch = pool.take_floats(op_.input.dtype == TIDEGATE_FLOAT32 ? 0 : n);
      const float* values = nullptr;
      float* unused = nullptr;
      TG_RETURN_IF_ERROR(load_compensated(op_, 0, n, scratch.floats(), &values, &unused));
      TG_RETURN_IF_ERROR(encode_whole(op_, float_view(values, n), seed, &payload));
    }
    ParsedSparsePayload parsed;
    TG_RETURN_IF_ERROR(parse_sparse_payload(op_.codec->id(), kAnyCodecFlags, payload.data(),
                                            payload.size, n, &parsed));
    Regions regions(op_.size);
    SparseEntryCursor entries(parsed);
    entries.visit_below(n, [&](int64_t i, float v) { regions.deal(i, v); });
    return write_regions(regions);
  }

  // Step 1 for random-k, whose payload holds seeded indices rather than the sparse layout: its
  // decoding, a dense tensor (zeros elsewhere), is the sender's own view, read back per region.
  Status encode_densely() {
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
    TG_RETURN_IF_ERROR(
        op_.codec->decode(payload.data(), payload.size, float_view(sent.floats(), n)));
    if (residual != nullptr) update_residual(residual, compensated, sent.floats(), n);
    Regions regions(op_.size);
    for (int64_t i = 0; i < n; ++i) regions.deal(i, sent.floats()[i]);
    return write_regions(regions);
  }

  // Each region's entries as a sparse payload of region-local indices.
  Status write_regions(const Regions& regions) {
    regions_.resize(static_cast<size_t>(op_.size));
    for (int r = 0; r < op_.size; ++r) {
      const std::vector<int64_t>& indices = regions.indices[r];
      const std::vector<float>& values = regions.values[r];
      const int64_t length = region_length(r);
      const auto k = static_cast<int64_t>(indices.size());
      const size_t bound = sparse_payload_bound(length, k);
      regions_[r] = op_.state->buffers().take(bound);
      TG_RETURN_IF_ERROR(write_sparse_payload(op_.codec->id(), TIDEGATE_FLOAT32, 0, length,
                                              indices.data(), values.data(), k, regions_[r].data(),
                                              bound, &regions_[r].size));
    }
    return Status::ok();
  }

  // A region payload of `length` places from rank `from`, checked whole before any use.
  Status parse_region(int from, const uint8_t* payload, size_t bytes, int64_t length,
                      ParsedSparsePayload* parsed) const {
    Status st = parse_sparse_payload(op_.codec->id(), 0, payload, bytes, length, parsed);
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
    // Block by block in the cache, each block taking its places from every rank's payload in
    // rank order (+0.0 plus each contribution, as a decode-add of each payload in turn would).
    std::vector<SparseEntryCursor> parts;
    int64_t entries = 0;
    for (int r = 0; r < op_.size; ++r) {
      const uint8_t* payload = r == op_.rank ? regions_[r].data() : by_rank[r]->buffer.data();
      const size_t bytes = r == op_.rank ? regions_[r].size : by_rank[r]->bytes;
      ParsedSparsePayload parsed;
      TG_RETURN_IF_ERROR(parse_region(r, payload, bytes, length, &parsed));
      entries += parsed.k;
      parts.emplace_back(parsed);
    }
    std::vector<int64_t> indices;
    std::vector<float> values;
    indices.reserve(static_cast<size_t>(std::min(entries, length)));
    values.reserve(static_cast<size_t>(std::min(entries, length)));
    std::vector<float> block(static_cast<size_t>(kAssembleBlock));
    const float ranks = static_cast<float>(op_.size);
    for (int64_t begin = 0; begin < length; begin += kAssembleBlock) {
      const int64_t end = std::min(length, begin + kAssembleBlock);
      std::fill(block.begin(), block.end(), 0.0f);
      for (SparseEntryCursor& part : parts) {
        part.visit_below(end, [&](int64_t j, float v) { block[j - begin] += v; });
      }
      for (int64_t j = begin; j < end; ++j) {
        const float v = op_.average ? block[j - begin] / ranks : block[j - begin];
        if (v != 0.0f) {
          indices.push_back(j);
          values.push_back(v);
        }
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

  // Every merged region, from the bytes every rank holds, into its strided places: all P are
  // checked first (a bad one leaves the output untouched), then the output is written once,
  // block by block, each block taking its places from every region's cursor.
  Status assemble_output() {
    const int64_t n = op_.count();
    std::vector<SparseEntryCursor> regions;
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
      ParsedSparsePayload parsed;
      TG_RETURN_IF_ERROR(parse_region(r, payload, bytes, region_length(r), &parsed));
      regions.emplace_back(parsed);
    }
    PooledBuffer scratch =
        op_.state->buffers().take_floats(op_.output.dtype == TIDEGATE_FLOAT32 ? 0 : n);
    float* result = result_slot(op_, 0, scratch.floats());
    const auto p = static_cast<int64_t>(op_.size);
    for (int64_t begin = 0; begin < n; begin += kAssembleBlock) {
      const int64_t end = std::min(n, begin + kAssembleBlock);
      std::fill(result + begin, result + end, 0.0f);
      for (int64_t r = 0; r < p; ++r) {
        // Places j of region r with j P + r < end.
        const int64_t places = end > r ? (end - r + p - 1) / p : 0;
        regions[r].visit_below(places, [&](int64_t j, float v) { result[j * p + r] = v; });
      }
    }
    finish_result(op_, result, 0, n);
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
//
// Compute, on the allgather's scale (payload_allgather.cc prices its sum of P payloads over
// the n outputs at P decodes of n): the owner's merge of P region payloads over n/P places is
// P decodes of n/P, and the assembly of P merged regions over the n outputs is P decodes of n,
// so (P + 1) decodes of n beside the allgather's P. Pricing them as 3 decodes of n made this
// algorithm the model's pick for top-k 1% at 10 Gbit and unshaped, where it measured 1.10-1.56x
// the allgather's time (RESULTS (e)); with disjoint selections it sends more bytes too, so it
// now ranks first only where merged regions turn dense and the gather's bytes are capped.
double allreduce_sparse_reduce_scatter_cost_us(const CostTerms& t, double n, int64_t p) {
  const double frac = cost::spread(p);
  const double scatter = n * t.payload_ratio * frac;
  const double merged = std::min(n * t.payload_ratio, n / static_cast<double>(p));
  return 2 * t.alpha + (scatter + static_cast<double>(p - 1) * merged) * t.beta +
         n * (t.encode + static_cast<double>(p + 1) * t.decode);
}

}  // namespace tidegate
