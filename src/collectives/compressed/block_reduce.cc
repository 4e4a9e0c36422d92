#include "collectives/compressed/block_reduce.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace tidegate {

namespace {

struct Segment {
  int64_t offset = 0;  // in the tensor
  int64_t length = 0;
};

constexpr int kScatterTag = 0;
constexpr int kGatherTag = 1;

class BlockReduceTask : public CollectiveTask {
 public:
  BlockReduceTask(const TaskContext& context, const CompressedOp& op, const WireHeader& header,
                  BlockCombine combine, const char* name)
      : messenger_(context, header),
        op_(op),
        combine_(combine),
        name_(name),
        inbox_(&op.state->buffers()) {
    const int64_t segment = block_segment_elements(*context.config);
    segments_.resize(static_cast<size_t>(op.size));
    for (int c = 0; c < op.size; ++c) {
      int64_t offset = 0, length = 0;
      block_range(op.count(), op.size, c, &offset, &length);
      for (int64_t done = 0; done < length; done += segment) {
        segments_[c].push_back({offset + done, std::min(segment, length - done)});
      }
      waves_ = std::max(waves_, segments_[c].size());
    }
    gather_base_ = waves_;
  }

  // An op that ends early (a peer's bad payload, an abort) still leaves this rank's sender
  // residual as its whole encoding leaves it, so that a residual depends only on the rank's own
  // input, never on when a peer failed: the segments not encoded yet are encoded here (nothing
  // is sent), and under decode-and-reencode the own block's segments count as sent exactly.
  ~BlockReduceTask() override {
    if (!started_ || !op_.error_feedback) return;
    for (int owner = 0; owner < op_.size; ++owner) {
      const bool sends = owner != op_.rank || combine_ == BlockCombine::kSumPayloads;
      for (size_t s = 0; sends && s < segments_[owner].size(); ++s) {
        if (encoded_[owner][s]) continue;
        PooledBuffer unused;
        (void)encode_sender(owner, s, &unused);  // finite input (checked in start)
      }
    }
    if (combine_ != BlockCombine::kDecodeAndReencode) return;
    for (size_t s = reduced_; s < segments_[op_.rank].size(); ++s) {
      const Segment& segment = segments_[op_.rank][s];
      float* residual = nullptr;
      if (op_.state->sender().float_residual(op_.key, op_.count(), &residual).is_ok()) {
        std::fill(residual + segment.offset, residual + segment.offset + segment.length, 0.0f);
      }
    }
  }

  const char* algorithm() const override { return name_; }
  bool has_local_work() const override { return next_wave_ < waves_; }

  Status start() override {
    // With error feedback, a refused input must leave every residual as it was: look at it all
    // before the first segment's residual changes. (Without, the codec refuses it, per segment.)
    if (op_.error_feedback) TG_RETURN_IF_ERROR(check_finite_input(op_));
    const std::vector<Segment>& mine = segments_[op_.rank];
    int64_t longest = 0;
    for (const auto& block : segments_) {
      for (const Segment& s : block) longest = std::max(longest, s.length);
    }
    for (std::vector<float>* scratch : {&compensated_, &decoded_, &sum_}) {
      scratch->resize(static_cast<size_t>(longest));
    }
    missing_.assign(mine.size(), op_.size - 1);
    contributions_.assign(mine.size(), std::vector<size_t>(static_cast<size_t>(op_.size), 0));
    own_payloads_.resize(mine.size());
    owner_payloads_.resize(mine.size());
    sender_payloads_.resize(static_cast<size_t>(op_.size));
    for (int c = 0; c < op_.size; ++c) sender_payloads_[c].resize(segments_[c].size());
    encoded_.assign(static_cast<size_t>(op_.size), {});
    for (int c = 0; c < op_.size; ++c) encoded_[c].assign(segments_[c].size(), false);
    started_ = true;
    // Every receive is posted now: the contributions to this rank's segments, and the owners'
    // combined segments of every other block.
    for (int step = 1; step < op_.size; ++step) {
      const int from = (op_.rank - step + op_.size) % op_.size;
      for (size_t s = 0; s < mine.size(); ++s) {
        size_t index = 0;
        TG_RETURN_IF_ERROR(inbox_.receive(
            messenger_, from, s, payload_bound(*op_.codec, mine[s].length), kScatterTag, &index));
        contributions_[s][from] = index;
      }
      for (size_t s = 0; s < segments_[from].size(); ++s) {
        size_t index = 0;
        TG_RETURN_IF_ERROR(inbox_.receive(messenger_, from, gather_base_ + s,
                                          gathered_bound(segments_[from][s].length), kGatherTag,
                                          &index));
        gathered_segment_[index] = s;
      }
    }
    return Status::ok();
  }

  Status advance(bool* done) override {
    *done = false;
    if (next_wave_ < waves_) {
      TG_RETURN_IF_ERROR(encode_wave(next_wave_++));
      TG_RETURN_IF_ERROR(flush_gathers());
    }
    std::vector<size_t> arrived;
    TG_RETURN_IF_ERROR(inbox_.poll(messenger_, &arrived));
    for (size_t index : arrived) {
      Inbox::Message& message = inbox_.message(index);
      if (message.tag == kGatherTag) {
        TG_RETURN_IF_ERROR(deliver(message, gathered_segment_[index]));
      } else {
        --missing_[message.chunk];
      }
    }
    // Segments of this rank's block whose contributions are all in, in order.
    const std::vector<Segment>& mine = segments_[op_.rank];
    while (reduced_ < mine.size() && missing_[reduced_] == 0 &&
           (combine_ == BlockCombine::kDecodeAndReencode || reduced_ < next_wave_)) {
      TG_RETURN_IF_ERROR(reduce_segment(reduced_++));
    }
    bool sent = false;
    TG_RETURN_IF_ERROR(outbox_.all_sent(messenger_, &sent));
    *done = sent && next_wave_ == waves_ && reduced_ == mine.size() && inbox_.all_arrived();
    return Status::ok();
  }

 private:
  size_t gathered_bound(int64_t length) const {
    if (combine_ == BlockCombine::kDecodeAndReencode) return payload_bound(*op_.codec, length);
    TensorView like = float_view(static_cast<float*>(nullptr), length);
    const size_t condensed = op_.codec->max_condensed_payload_bytes(like, op_.size);
    return condensed > 0 ? condensed : op_.codec->max_summed_payload_bytes(like, op_.size);
  }

  // Encodes input + sender residual of [segment.offset, +length) into *payload (error feedback
  // updates the residual with what the payload leaves out).
  Status encode_sender(int owner, size_t s, PooledBuffer* payload) {
    const Segment& segment = segments_[owner][s];
    const uint64_t part = block_sender_part(owner, s);
    encoded_[owner][s] = true;
    const float* values = nullptr;
    float* residual = nullptr;
    TG_RETURN_IF_ERROR(load_compensated(op_, segment.offset, segment.length, compensated_.data(),
                                        &values, &residual));
    Status encoded = encode_slice(op_, values, segment.length, encoding_seed(op_, part, true),
                                  residual, decoded_.data(), payload);
    if (!encoded.is_ok()) {
      return std::move(encoded).with_context(std::string(name_) + ": elements from " +
                                             std::to_string(segment.offset) + ": ");
    }
    return Status::ok();
  }

  // Segment s of every other rank's block (and of its own, when payloads are summed).
  Status encode_wave(size_t s) {
    for (int step = 1; step <= op_.size; ++step) {
      const int owner = (op_.rank + step) % op_.size;
      if (s >= segments_[owner].size()) continue;
      if (owner == op_.rank) {
        if (combine_ == BlockCombine::kSumPayloads) {
          TG_RETURN_IF_ERROR(encode_sender(owner, s, &own_payloads_[s]));
        }
        continue;
      }
      PooledBuffer& payload = sender_payloads_[owner][s];
      TG_RETURN_IF_ERROR(encode_sender(owner, s, &payload));
      TG_RETURN_IF_ERROR(outbox_.send(messenger_, owner, s, payload.data(), payload.size));
    }
    return Status::ok();
  }

  Status contribution_error(int from, size_t s, const Status& status) const {
    return Status(status.code(), std::string(name_) + ": the payload of rank " +
                                     std::to_string(from) + " for segment " + std::to_string(s) +
                                     " of rank " + std::to_string(op_.rank) +
                                     "'s block does not decode: " + status.message());
  }

  Status reduce_segment(size_t s) {
    const Segment& segment = segments_[op_.rank][s];
    PooledBuffer& out = owner_payloads_[s];
    if (combine_ == BlockCombine::kDecodeAndReencode) {
      TG_RETURN_IF_ERROR(decode_and_reencode(s, segment, &out));
    } else {
      TG_RETURN_IF_ERROR(sum_payloads(s, segment, &out));
    }
    ready_to_gather_.push_back(s);
    return flush_gathers();
  }

  // Messages between two ranks pair by their order on the channel, so every rank sends a peer
  // all its scatter payloads before any gather payload (the order in which the peer posted its
  // receives). Reduced segments wait here until this rank's last wave is out.
  Status flush_gathers() {
    if (next_wave_ < waves_) return Status::ok();
    for (size_t s : ready_to_gather_) {
      const PooledBuffer& out = owner_payloads_[s];
      for (int step = 1; step < op_.size; ++step) {
        const int to = (op_.rank + step) % op_.size;
        TG_RETURN_IF_ERROR(outbox_.send(messenger_, to, gather_base_ + s, out.data(), out.size));
      }
    }
    ready_to_gather_.clear();
    return Status::ok();
  }

  // The float32 sum of the P contributions in rank order (this rank's own input exactly), then
  // the owner's encoding of it; leaves the decoded result in the output.
  Status decode_and_reencode(size_t s, const Segment& segment, PooledBuffer* out) {
    const int64_t n = segment.length;
    float* sum = sum_.data();
    std::fill(sum, sum + n, 0.0f);
    for (int r = 0; r < op_.size; ++r) {
      if (r == op_.rank) {
        const float* own = nullptr;
        float* residual = nullptr;
        TG_RETURN_IF_ERROR(
            load_compensated(op_, segment.offset, n, compensated_.data(), &own, &residual));
        for (int64_t i = 0; i < n; ++i) sum[i] += own[i];
        if (residual != nullptr) std::fill(residual, residual + n, 0.0f);  // sent exactly
        continue;
      }
      const Inbox::Message& m = inbox_.message(contributions_[s][r]);
      Status decoded = op_.codec->decode_add(m.buffer.data(), m.bytes, float_view(sum, n));
      if (!decoded.is_ok()) return contribution_error(r, s, decoded);
    }
    float* residual = nullptr;
    if (op_.error_feedback) {
      TG_RETURN_IF_ERROR(op_.state->owner().float_residual(op_.key, op_.count(), &residual));
      residual += segment.offset;
      for (int64_t i = 0; i < n; ++i) sum[i] += residual[i];
    }
    // The owner encodes the average once, so every rank gets its bits.
    const float ranks = static_cast<float>(op_.size);
    const float* value = sum;
    if (op_.average) {
      float* scaled = compensated_.data();
      for (int64_t i = 0; i < n; ++i) scaled[i] = sum[i] / ranks;
      value = scaled;
    }
    EncodeContext encode;
    encode.seed = encoding_seed(op_, block_owner_part(s), /*per_rank=*/true);
    const size_t bound = payload_bound(*op_.codec, n);
    *out = op_.state->buffers().take(bound);
    TG_RETURN_IF_ERROR(
        op_.codec->encode(float_view(value, n), encode, out->data(), bound, &out->size));
    float* decoded = result_slot(op_, segment.offset, decoded_.data());
    TG_RETURN_IF_ERROR(op_.codec->decode(out->data(), out->size, float_view(decoded, n)));
    if (residual != nullptr) {
      // Kept in the sum's domain: what the encoding left out of the sum, whatever the op.
      for (int64_t i = 0; i < n; ++i) {
        residual[i] = sum[i] - (op_.average ? decoded[i] * ranks : decoded[i]);
      }
    }
    finish_result(op_, decoded, segment.offset, n);
    return Status::ok();
  }

  // The P encoded contributions summed in the compressed domain in rank order.
  Status sum_payloads(size_t s, const Segment& segment, PooledBuffer* out) {
    const int64_t n = segment.length;
    const TensorView like = float_view(static_cast<float*>(nullptr), n);
    BufferPool& pool = op_.state->buffers();
    for (int r = 0; r < op_.size; ++r) {
      const PooledBuffer* mine = r == op_.rank ? &own_payloads_[s] : nullptr;
      const uint8_t* payload = mine != nullptr ? mine->data() : nullptr;
      size_t bytes = mine != nullptr ? mine->size : 0;
      if (mine == nullptr) {
        const Inbox::Message& m = inbox_.message(contributions_[s][r]);
        payload = m.buffer.data();
        bytes = m.bytes;
      }
      const size_t capacity = op_.codec->max_summed_payload_bytes(like, r + 1);
      PooledBuffer next = pool.take(std::max(capacity, bytes));
      if (r == 0) {
        std::memcpy(next.data(), payload, bytes);
        next.size = bytes;
      } else {
        Status summed = op_.codec->sum_payloads(out->data(), out->size, payload, bytes, like,
                                                next.data(), capacity, &next.size);
        if (!summed.is_ok()) return contribution_error(r, s, summed);
      }
      *out = std::move(next);
    }
    // What is gathered is only decoded: the codec's condensed form of the sum, where it has
    // one (signsgd: the decision, 2 bits per element where the counts take log2(P + 1)).
    const size_t condensed = op_.codec->max_condensed_payload_bytes(like, op_.size);
    if (condensed > 0) {
      PooledBuffer next = pool.take(condensed);
      TG_RETURN_IF_ERROR(op_.codec->condense_sum(out->data(), out->size, like, next.data(),
                                                 condensed, &next.size));
      *out = std::move(next);
    }
    float* decoded = result_slot(op_, segment.offset, decoded_.data());
    TG_RETURN_IF_ERROR(op_.codec->decode(out->data(), out->size, float_view(decoded, n)));
    finish_result(op_, decoded, segment.offset, n);
    return Status::ok();
  }

  // An owner's combined segment: decoded into the output, as the owner did itself.
  Status deliver(const Inbox::Message& m, size_t s) {
    const Segment& segment = segments_[m.peer][s];
    float* slot = result_slot(op_, segment.offset, decoded_.data());
    Status decoded = op_.codec->decode(m.buffer.data(), m.bytes, float_view(slot, segment.length));
    if (!decoded.is_ok()) {
      return Status(decoded.code(), std::string(name_) + ": rank " + std::to_string(m.peer) +
                                        "'s combined segment " + std::to_string(s) +
                                        " does not decode: " + decoded.message());
    }
    finish_result(op_, slot, segment.offset, segment.length);
    return Status::ok();
  }

  Messenger messenger_;
  CompressedOp op_;
  BlockCombine combine_;
  const char* name_;
  std::vector<std::vector<Segment>> segments_;  // per block (rank c owns block c)
  size_t waves_ = 0;                            // segments of the longest block
  size_t next_wave_ = 0;                        // the next segment index to encode for every block
  uint64_t gather_base_ = 0;
  std::vector<int> missing_;                        // per own segment: contributions not in yet
  std::vector<std::vector<size_t>> contributions_;  // per own segment, per rank: inbox index
  std::map<size_t, size_t> gathered_segment_;       // inbox index -> segment of its owner's block
  std::vector<std::vector<PooledBuffer>> sender_payloads_;  // per block, per segment
  std::vector<std::vector<bool>> encoded_;  // per block, per segment: sender residual updated
  bool started_ = false;                    // start() passed its input checks
  std::vector<PooledBuffer> own_payloads_;    // kSumPayloads: this rank's own encodings
  std::vector<PooledBuffer> owner_payloads_;  // per own segment: the combined encoding
  size_t reduced_ = 0;
  std::vector<size_t> ready_to_gather_;             // reduced, not yet sent (flush_gathers)
  std::vector<float> compensated_, decoded_, sum_;  // scratch of one segment
  Inbox inbox_;
  Outbox outbox_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_block_reduce_task(const TaskContext& context,
                                                       const CompressedOp& op,
                                                       const WireHeader& header,
                                                       BlockCombine combine, const char* name) {
  return std::make_unique<BlockReduceTask>(context, op, header, combine, name);
}

}  // namespace tidegate
