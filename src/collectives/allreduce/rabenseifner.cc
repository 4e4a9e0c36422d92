// Rabenseifner allreduce: reduce-scatter by recursive halving, then allgather by recursive
// doubling. Each rank sends about 2 (P-1)/P of the tensor, like the ring, but in 2 log2(P)
// messages instead of 2 (P-1), which wins for medium sizes. Non-powers of two fold in first
// (fold.h).
//
// The vector is cut into pof2 blocks (block_range). In halving round i the partners at
// distance pof2 >> i split their common range of blocks: the rank whose bit is set keeps the
// upper half, sends the lower half and combines what it receives (the lower new rank's value
// first). After log2(pof2) rounds new rank n owns block n fully reduced, finalises AVG on it,
// and the doubling rounds send the owners' bytes to everybody, so all ranks end identical.
//
// Rounds (the chunk field carries the round): 0 fold, 1..L halving, L+1..2L doubling,
// 2L+1 unfold.
//
// Receives ahead: which bytes arrive from whom in each round depends only on new_rank's bits,
// so where the transport allows it (TransportCapabilities::receives_ahead) every halving and
// doubling receive is posted at the start of round 1. On a rendezvous transport (tcp's RTS /
// RTR, UCX's and MPI's large-message protocols) the receiver's ready notice then reaches each
// partner long before that partner's data is ready, instead of leaving only when the round
// starts and queueing behind the previous round's payload: on the emulated 1 Gbit/s cluster
// that wait cost about a third of a 4 MiB allreduce. Each halving round receives into its own
// part of the scratch buffer (a later round's data may arrive before an earlier round is
// reduced). A doubling round receives into output blocks this rank gave away while halving;
// the data can only come after the partner received those blocks (it needs them to finish
// halving), so it never overwrites bytes still being sent.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/allreduce/fold.h"
#include "collectives/task_kit.h"
#include "numeric/reduce.h"

namespace tidegate {

namespace {

class Rabenseifner : public RoundTask {
 public:
  Rabenseifner(const TaskContext& context, const CollectiveArgs& args)
      : RoundTask(context, op_identity(context, args)),
        args_(args),
        fold_(Fold::plan(context.rank, context.size)),
        steps_(fold_.steps()),
        element_size_(args.output.element_size()) {}

  Status start() override {
    copy_unless_same(args_.output.data, args_.input.data, args_.output.bytes());
    const uint64_t halving_bytes = plan_rounds();
    if (messenger().size() > 1 && args_.output.bytes() > 0) {
      scratch_ = std::make_unique_for_overwrite<char[]>(
          std::max<uint64_t>(args_.output.bytes(), halving_bytes));
    }
    return RoundTask::start();
  }

  const char* algorithm() const override { return "rabenseifner"; }

 protected:
  Status post_round(int round, bool* exists) override;
  Status finish_round(int round) override;

 private:
  // First element of block `b` of the pof2 blocks (b == pof2 gives the total count).
  int64_t block_start(int b) const {
    if (b >= fold_.pof2) return args_.output.count;
    int64_t offset = 0, length = 0;
    block_range(args_.output.count, fold_.pof2, b, &offset, &length);
    return offset;
  }
  char* output_at(int64_t elements) const {
    return args_.output.byte_data() + elements * static_cast<int64_t>(element_size_);
  }
  uint64_t bytes_between(int first_block, int end_block) const {
    return payload_bytes(block_start(end_block) - block_start(first_block), element_size_);
  }
  int partner(int mask) const { return fold_.real_rank(fold_.new_rank ^ mask); }
  bool upper(int mask) const { return (fold_.new_rank & mask) != 0; }
  int halving_mask(int round) const { return fold_.pof2 >> round; }
  int doubling_mask(int round) const { return 1 << (round - steps_ - 1); }

  // One halving or doubling round of this rank: its partner, the blocks it sends and the
  // blocks it receives. A halving round receives its partner's values of the blocks it keeps
  // into its own part of scratch_ (at scratch_offset) and reduces them into the output there;
  // a doubling round receives the partner's reduced blocks straight into the output.
  struct Exchange {
    int peer = 0;
    int send_lo = 0, send_hi = 0;  // blocks [send_lo, send_hi)
    int recv_lo = 0, recv_hi = 0;  // blocks [recv_lo, recv_hi)
    uint64_t scratch_offset = 0;
    Transport::Handle handle = 0;  // the receive, once posted ahead, until its round takes it
  };
  // Fills rounds_ for rounds 1..2L from new_rank's bits (this rank's range of blocks halves,
  // then doubles back); returns the scratch bytes the halving rounds need side by side.
  uint64_t plan_rounds();
  bool halving(int round) const { return round <= steps_; }
  char* received_at(int round) {
    const Exchange& x = rounds_[static_cast<size_t>(round - 1)];
    return halving(round) ? scratch_.get() + x.scratch_offset : output_at(block_start(x.recv_lo));
  }
  // Adds round `round`'s receive to the round's transfers, posting it (and, on round 1 where
  // the transport allows, every later round's too) first.
  Status take_receive(int round);

  Status post_fold(int round);
  Status post_exchange(int round);

  CollectiveArgs args_;
  Fold fold_;
  int steps_;
  size_t element_size_;
  std::unique_ptr<char[]> scratch_;
  std::vector<Exchange> rounds_;  // [round - 1] for rounds 1..2L
  int owned_lo_ = 0;              // the blocks this rank holds fully reduced after halving
  int owned_hi_ = 1;
};

// Round 0 (fold): the giver sends its vector, the taker receives it into scratch. Last round
// (unfold): the taker sends the result, the giver receives it into its output.
Status Rabenseifner::post_fold(int round) {
  if (!fold_.gives() && !fold_.takes()) return Status::ok();
  const uint64_t chunk = static_cast<uint64_t>(round);
  const uint64_t bytes = args_.output.bytes();
  const bool unfold = round != 0;
  if (fold_.gives() != unfold) {
    return messenger().send(fold_.fold_peer, chunk, args_.output.data, bytes, transfers().add());
  }
  void* into = unfold ? args_.output.data : scratch_.get();
  return messenger().recv(fold_.fold_peer, chunk, into, bytes, transfers().add());
}

uint64_t Rabenseifner::plan_rounds() {
  rounds_.assign(static_cast<size_t>(2 * steps_), Exchange{});
  if (fold_.sits_out()) return 0;  // it only folds in and out
  int lo = 0, hi = fold_.pof2;     // this rank's range of blocks
  uint64_t scratch_used = 0;
  for (int round = 1; round <= steps_; ++round) {
    // The upper partner keeps the upper half of the common range, the lower one the lower.
    const int mask = halving_mask(round);
    const int mid = (lo + hi) / 2;
    Exchange& x = rounds_[static_cast<size_t>(round - 1)];
    x.peer = partner(mask);
    x.send_lo = upper(mask) ? lo : mid;
    x.send_hi = upper(mask) ? mid : hi;
    x.recv_lo = upper(mask) ? mid : lo;
    x.recv_hi = upper(mask) ? hi : mid;
    x.scratch_offset = scratch_used;
    scratch_used += bytes_between(x.recv_lo, x.recv_hi);
    lo = x.recv_lo;
    hi = x.recv_hi;
  }
  owned_lo_ = lo;
  owned_hi_ = hi;
  for (int round = steps_ + 1; round <= 2 * steps_; ++round) {
    // Each side sends what it holds and receives the partner's equally wide neighbour range.
    const int mask = doubling_mask(round);
    const int width = hi - lo;
    Exchange& x = rounds_[static_cast<size_t>(round - 1)];
    x.peer = partner(mask);
    x.send_lo = lo;
    x.send_hi = hi;
    x.recv_lo = upper(mask) ? lo - width : hi;
    x.recv_hi = x.recv_lo + width;
    lo = std::min(lo, x.recv_lo);
    hi = std::max(hi, x.recv_hi);
  }
  return scratch_used;
}

Status Rabenseifner::take_receive(int round) {
  const bool ahead = messenger().context().transport->capabilities().receives_ahead;
  if (!ahead || round == 1) {
    const int last = ahead ? 2 * steps_ : round;
    for (int r = round; r <= last; ++r) {
      Exchange& x = rounds_[static_cast<size_t>(r - 1)];
      TG_RETURN_IF_ERROR(messenger().recv(x.peer, static_cast<uint64_t>(r), received_at(r),
                                          bytes_between(x.recv_lo, x.recv_hi), &x.handle));
    }
  }
  Exchange& x = rounds_[static_cast<size_t>(round - 1)];
  *transfers().add() = x.handle;
  x.handle = 0;
  return Status::ok();
}

Status Rabenseifner::post_exchange(int round) {
  // Receive first: its ready notice should leave before this round's payload.
  TG_RETURN_IF_ERROR(take_receive(round));
  const Exchange& x = rounds_[static_cast<size_t>(round - 1)];
  return messenger().send(x.peer, static_cast<uint64_t>(round), output_at(block_start(x.send_lo)),
                          bytes_between(x.send_lo, x.send_hi), transfers().add());
}

Status Rabenseifner::post_round(int round, bool* exists) {
  const int unfold = 2 * steps_ + 1;
  *exists = round <= unfold;
  if (round == steps_ + 1 && !fold_.sits_out() && args_.reduce_op == TIDEGATE_AVG) {
    // This rank owns block new_rank now; finalise it once before it is sent to everybody.
    finalize_average(output_at(block_start(owned_lo_)),
                     block_start(owned_hi_) - block_start(owned_lo_), args_.output.dtype,
                     messenger().size());
  }
  if (round == 0 || round == unfold) return post_fold(round);
  if (round > unfold || fold_.sits_out()) return Status::ok();
  return post_exchange(round);
}

Status Rabenseifner::finish_round(int round) {
  if (round == 0 && fold_.takes()) {
    // The giver is rank - 1: its value goes first.
    reduce(args_.output.data, scratch_.get(), args_.output.data, args_.output.count,
           args_.output.dtype, args_.reduce_op);
  } else if (round >= 1 && halving(round) && !fold_.sits_out()) {
    // The lower new rank's value goes first.
    const Exchange& x = rounds_[static_cast<size_t>(round - 1)];
    char* kept = output_at(block_start(x.recv_lo));
    const char* received = received_at(round);
    const bool from_lower = upper(halving_mask(round));
    reduce(kept, from_lower ? received : kept, from_lower ? kept : received,
           block_start(x.recv_hi) - block_start(x.recv_lo), args_.output.dtype, args_.reduce_op);
  }
  return Status::ok();
}

}  // namespace

Status make_allreduce_rabenseifner(const TaskContext& context, const CollectiveArgs& args,
                                   std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  TG_CHECK_ARG(args.output.count == args.input.count,
               "allreduce: input and output must have the same count");
  *task = std::make_unique<Rabenseifner>(context, args);
  return Status::ok();
}

// Recursive halving reduce-scatter then recursive doubling allgather, each log2(p') messages
// moving (p'-1)/p' of the vector; the reduction works on whole received halves, so it does not
// overlap the transfer. Same fold as recursive doubling otherwise.
double allreduce_rabenseifner_cost_us(const CostTerms& t, double n, int64_t p) {
  if (t.gamma < 0) return -1;
  const int64_t core = cost::floor_pow2(p);
  const double frac = cost::spread(core);
  double us = 2 * std::log2(static_cast<double>(core)) * t.alpha + 2 * frac * n * t.beta +
              frac * n * t.gamma;
  if (core != p) us += (t.alpha + n * t.beta + n * t.gamma) + (t.alpha + n * t.beta);
  return us;
}

}  // namespace tidegate
