// Pairwise-exchange alltoallv: in step s (1 .. P-1) rank r sends its block for rank r+s and
// receives the block from rank r-s, so every rank talks to exactly one peer in each direction
// per step and no receiver is flooded by all senders at once (incast). The rank's own block
// is copied locally.
//
// Per-pair counts are checked on both sides (tidegate.h: send_counts[p] on rank r must equal
// recv_counts[r] on rank p). Before the data, every rank sends every peer two empty "claim"
// messages whose header counts are what it will send to that peer and what it expects from
// it; the peer expects its own recv and send counts there. All claims are posted at once,
// before anything can fail, so a disagreement in either direction of a pair is a MISMATCH
// naming both ranks and 'count' on both ranks of the pair, even when they do not abort.
#include <memory>

#include "collectives/algorithms.h"
#include "collectives/task_kit.h"

namespace tidegate {

namespace {

constexpr uint64_t kSendClaimChunk = 0;  // count: what the sender will send
constexpr uint64_t kRecvClaimChunk = 1;  // count: what the sender expects to receive
constexpr uint64_t kDataChunk = 2;

class PairwiseAlltoallv : public RoundTask {
 public:
  PairwiseAlltoallv(const TaskContext& context, const CollectiveArgs& args)
      : RoundTask(context, op_identity(context, args)),
        args_(args),
        element_size_(args.input.element_size()) {}

  Status start() override {
    const size_t me = static_cast<size_t>(messenger().rank());
    if (args_.send_counts[me] != args_.recv_counts[me]) {
      return mismatch_error(describe_op(messenger().op()) + ": rank " + std::to_string(me) +
                            " sends itself " + std::to_string(args_.send_counts[me]) +
                            " elements (send_counts) but expects " +
                            std::to_string(args_.recv_counts[me]) + " (recv_counts)");
    }
    copy_unless_same(output_at(args_.recv_offsets[me]), input_at(args_.send_offsets[me]),
                     payload_bytes(args_.send_counts[me], element_size_));
    return RoundTask::start();
  }

  const char* algorithm() const override { return "pairwise"; }

 protected:
  Status post_round(int round, bool* exists) override;
  Status finish_round(int /*round*/) override { return Status::ok(); }

 private:
  Status post_claims();
  char* input_at(int64_t elements) const {
    return args_.input.byte_data() + elements * static_cast<int64_t>(element_size_);
  }
  char* output_at(int64_t elements) const {
    return args_.output.byte_data() + elements * static_cast<int64_t>(element_size_);
  }
  WireHeader with_count(int sender, uint64_t chunk, int64_t count, uint64_t bytes) const {
    WireHeader header = messenger().header(sender, chunk, bytes);
    header.count = count;
    return header;
  }

  CollectiveArgs args_;
  size_t element_size_;
};

Status PairwiseAlltoallv::post_claims() {
  const int size = messenger().size();
  const int rank = messenger().rank();
  Messenger& m = messenger();
  for (int step = 1; step < size; ++step) {
    const int from = (rank - step + size) % size;
    const size_t f = static_cast<size_t>(from);
    TG_RETURN_IF_ERROR(m.recv_header(from,
                                     with_count(from, kSendClaimChunk, args_.recv_counts[f], 0),
                                     nullptr, transfers().add()));
    TG_RETURN_IF_ERROR(m.recv_header(from,
                                     with_count(from, kRecvClaimChunk, args_.send_counts[f], 0),
                                     nullptr, transfers().add()));
  }
  for (int step = 1; step < size; ++step) {
    const int to = (rank + step) % size;
    const size_t t = static_cast<size_t>(to);
    TG_RETURN_IF_ERROR(m.send_header(to, with_count(rank, kSendClaimChunk, args_.send_counts[t], 0),
                                     nullptr, transfers().add()));
    TG_RETURN_IF_ERROR(m.send_header(to, with_count(rank, kRecvClaimChunk, args_.recv_counts[t], 0),
                                     nullptr, transfers().add()));
  }
  return Status::ok();
}

// Round 0 posts every claim and the first data step; round k the data step k+1.
Status PairwiseAlltoallv::post_round(int round, bool* exists) {
  const int size = messenger().size();
  const int rank = messenger().rank();
  const int step = round + 1;
  *exists = step < size;
  if (!*exists) return Status::ok();
  if (round == 0) TG_RETURN_IF_ERROR(post_claims());
  const int to = (rank + step) % size;
  const int from = (rank - step + size) % size;
  const size_t t = static_cast<size_t>(to);
  const size_t f = static_cast<size_t>(from);
  const uint64_t in_bytes = payload_bytes(args_.recv_counts[f], element_size_);
  const uint64_t out_bytes = payload_bytes(args_.send_counts[t], element_size_);
  Messenger& m = messenger();
  TG_RETURN_IF_ERROR(m.recv_header(from,
                                   with_count(from, kDataChunk, args_.recv_counts[f], in_bytes),
                                   output_at(args_.recv_offsets[f]), transfers().add()));
  TG_RETURN_IF_ERROR(m.send_header(to,
                                   with_count(rank, kDataChunk, args_.send_counts[t], out_bytes),
                                   input_at(args_.send_offsets[t]), transfers().add()));
  return Status::ok();
}

// Every count and offset must describe a range inside its tensor.
Status check_ranges(const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                    int64_t tensor_count, int size, const char* what) {
  TG_CHECK_ARG(
      counts.size() == static_cast<size_t>(size) && offsets.size() == static_cast<size_t>(size),
      std::string("alltoallv: ") + what + " counts and offsets need one entry per rank");
  for (size_t p = 0; p < counts.size(); ++p) {
    TG_CHECK_ARG(counts[p] >= 0 && offsets[p] >= 0 && offsets[p] <= tensor_count &&
                     counts[p] <= tensor_count - offsets[p],
                 std::string("alltoallv: ") + what + " range for rank " + std::to_string(p) +
                     " lies outside the tensor");
  }
  return Status::ok();
}

}  // namespace

Status make_alltoallv_pairwise(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(args.input.dtype == args.output.dtype,
               "alltoallv: input and output must have the same dtype");
  TG_RETURN_IF_ERROR(
      check_ranges(args.send_counts, args.send_offsets, args.input.count, context.size, "send"));
  TG_RETURN_IF_ERROR(
      check_ranges(args.recv_counts, args.recv_offsets, args.output.count, context.size, "recv"));
  *task = std::make_unique<PairwiseAlltoallv>(context, args);
  return Status::ok();
}

// P-1 rounds, each sending this rank's n/P block for one peer.
double alltoallv_pairwise_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::ring_allgather(t, n, p);
}

}  // namespace tidegate
