// Recursive-doubling allreduce, for small messages: log2(P) rounds in which partners at
// distance 1, 2, 4, ... exchange their whole vectors and both combine them. Latency-optimal
// (one message per round) but each round moves the whole vector, hence the size rule sends
// only small tensors here. Non-powers of two fold in first (fold.h).
//
// Bitwise identity: both partners compute the same combine with the same operand order, the
// lower new rank's value first, so after every round the two hold identical bits; AVG is then
// finalised identically on every rank of the power-of-two phase, before the folded-out ranks
// get the finished bytes back.
//
// Partners are taken at distance pof2/2 first, then pof2/4, ..., 1: the order in which
// Rabenseifner's halving rounds pair ranks. Every element is then summed in the same tree,
// ((x0 + x2) + (x1 + x3)) for four ranks, by both algorithms and wherever it sits in the tensor,
// so a gradient session's dense results are bitwise the same fused, cut into chunks or alone.
//
// Rounds (the chunk field carries the round): 0 fold, 1..L exchange, L+1 unfold.
#include <cmath>
#include <memory>

#include "collectives/algorithms.h"
#include "collectives/allreduce/fold.h"
#include "collectives/task_kit.h"
#include "numeric/reduce.h"

namespace tidegate {

namespace {

class RecursiveDoubling : public RoundTask {
 public:
  RecursiveDoubling(const TaskContext& context, const CollectiveArgs& args)
      : RoundTask(context, op_identity(context, args)),
        args_(args),
        fold_(Fold::plan(context.rank, context.size)),
        bytes_(args.output.bytes()) {}

  Status start() override {
    copy_unless_same(args_.output.data, args_.input.data, bytes_);
    if (messenger().size() > 1 && bytes_ > 0) {
      scratch_ = std::make_unique_for_overwrite<char[]>(bytes_);
    }
    return RoundTask::start();
  }

  const char* algorithm() const override { return "recursive_doubling"; }

 protected:
  Status post_round(int round, bool* exists) override;
  Status finish_round(int round) override;

 private:
  // The partner's new rank in exchange round `round` (1..L): distance pof2 >> round.
  int partner_new_rank(int round) const { return fold_.new_rank ^ (fold_.pof2 >> round); }

  Status exchange(int peer, int round) {
    TG_RETURN_IF_ERROR(messenger().send(peer, static_cast<uint64_t>(round), args_.output.data,
                                        bytes_, transfers().add()));
    TG_RETURN_IF_ERROR(messenger().recv(peer, static_cast<uint64_t>(round), scratch_.get(), bytes_,
                                        transfers().add()));
    return Status::ok();
  }

  void combine(bool received_is_lower) {
    void* acc = args_.output.data;
    const void* lower = received_is_lower ? scratch_.get() : acc;
    const void* upper = received_is_lower ? acc : scratch_.get();
    reduce(acc, lower, upper, args_.output.count, args_.output.dtype, args_.reduce_op);
  }

  CollectiveArgs args_;
  Fold fold_;
  size_t bytes_;
  std::unique_ptr<char[]> scratch_;
};

Status RecursiveDoubling::post_round(int round, bool* exists) {
  const int last = fold_.steps() + 1;
  *exists = round <= last;
  const uint64_t chunk = static_cast<uint64_t>(round);
  if (round == 0) {
    if (fold_.gives()) {
      TG_RETURN_IF_ERROR(
          messenger().send(fold_.fold_peer, chunk, args_.output.data, bytes_, transfers().add()));
    } else if (fold_.takes()) {
      TG_RETURN_IF_ERROR(
          messenger().recv(fold_.fold_peer, chunk, scratch_.get(), bytes_, transfers().add()));
    }
  } else if (round < last) {
    if (!fold_.sits_out())
      TG_RETURN_IF_ERROR(exchange(fold_.real_rank(partner_new_rank(round)), round));
  } else if (round == last) {
    if (!fold_.sits_out() && args_.reduce_op == TIDEGATE_AVG) {
      finalize_average(args_.output.data, args_.output.count, args_.output.dtype,
                       messenger().size());
    }
    if (fold_.takes()) {
      TG_RETURN_IF_ERROR(
          messenger().send(fold_.fold_peer, chunk, args_.output.data, bytes_, transfers().add()));
    } else if (fold_.gives()) {
      TG_RETURN_IF_ERROR(
          messenger().recv(fold_.fold_peer, chunk, args_.output.data, bytes_, transfers().add()));
    }
  }
  return Status::ok();
}

Status RecursiveDoubling::finish_round(int round) {
  if (round == 0) {
    if (fold_.takes()) combine(/*received_is_lower=*/true);  // the giver is rank - 1
  } else if (round <= fold_.steps() && !fold_.sits_out()) {
    combine(/*received_is_lower=*/partner_new_rank(round) < fold_.new_rank);
  }
  return Status::ok();
}

}  // namespace

Status make_allreduce_recursive_doubling(const TaskContext& context, const CollectiveArgs& args,
                                         std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  TG_CHECK_ARG(args.output.count == args.input.count,
               "allreduce: input and output must have the same count");
  *task = std::make_unique<RecursiveDoubling>(context, args);
  return Status::ok();
}

// Each of log2(p') rounds exchanges and reduces the whole vector. A non-power-of-two P first
// folds the P - p' extra ranks into partners (one whole-vector send plus a reduce) and finally
// sends them the result (one more whole-vector send).
double allreduce_recursive_doubling_cost_us(const CostTerms& t, double n, int64_t p) {
  if (t.gamma < 0) return -1;
  const int64_t core = cost::floor_pow2(p);
  double us = std::log2(static_cast<double>(core)) * (t.alpha + n * t.beta + n * t.gamma);
  if (core != p) us += (t.alpha + n * t.beta + n * t.gamma) + (t.alpha + n * t.beta);
  return us;
}

}  // namespace tidegate
