// Native collectives without their identity round, for ops that repeat (issue 15).
//
// A native collective (MPI_Iallreduce) needs its ranks' arguments to agree before it is posted:
// MPI itself does not compare them, and mismatched counts truncate on some ranks and leave others
// with partial sums or a hang. So a native op normally first runs the engine's identity round on
// the first transport (progress_engine.cc, plan_op): one more message round, most of a small
// op's time. This file removes that round for the common case of an op that repeats, by
// predicting the next op's signature from the ops before it and folding the check into the
// collective itself (collectives/allreduce/predicted_native.h: a flag element every rank adds).
//
// The rule. Each op planned is recorded as the native allreduce it is (transport, count, dtype,
// op; a dense host allreduce of at most kMaxPredictedBytes planned natively), or as "other".
// When the last L records repeat the L before them (a training step's sequence of ops, or one
// op repeated: L = 1), the next op is expected to be the one L back. Of all such L up to
// kMaxPeriod the largest is taken: it rests on the most records, and every multiple of a true
// period predicts what the period does, whereas a smaller L can be a run of identical ops inside
// a longer cycle. If the op L back is a native allreduce, the next op is predicted to be that
// allreduce again. Every rank then starts that op with the predicted collective, whatever its
// own op is: a rank whose op is the predicted one contributes, any other rank is a decoy. If
// every rank contributed, the op is done; otherwise every rank runs the op as planned (its
// identity round names any mismatch). A re-planning round is neither predicted nor recorded:
// every rank posts it at the same place.
//
// Why a mismatch is still named on every rank, and never a wrong result or a hang. The danger
// is MPI matching two ranks' collectives of different shapes; it cannot happen:
// - A rank posts a predicted collective only once every earlier op it recorded as native has
//   finished (ProgressEngine::advance_op, after_earlier_native_ops). A native op finishes only
//   when every rank posted its collective, which a rank does only after its identity round or
//   its own predicted collective passed; those checks chain all ranks' headers, so that op was
//   the same native allreduce on every rank, and recorded alike everywhere.
// - Every other record is "other". An op that is "other" on one rank and native on another
//   never finishes on the second, which then never posts a collective after it; the first may
//   post its predicted collective, which nothing matches until the op's mismatch (named by the
//   identity round or the algorithm's header check) fails the communicator. So whenever two
//   ranks both post a collective at the same place in MPI's order, their records up to it agree
//   and they computed the same prediction from them: the same shape. MPI's order itself is the
//   posting order: every native collective of a transport runs on its one native lane.
// - Whether an op gets a predicted phase at all is decided when it is planned, from those
//   records, so ranks whose records agree decide alike; a rank whose decision differs is one
//   whose records differ, and the case above applies.
// - The verdict (all contributed, or not) is the reduced flag, identical on every rank, so
//   every rank either finishes the op or runs its planned phases. A decoy's zeros never reach a
//   result: a contributing rank writes its output only on the verdict "all contributed".
// - Arguments compared this way: kind, count, dtype, op, memory kind, and the plan's choice
//   (which follows from them on every rank). A broadcast's root, a codec, a collective kind:
//   any op other than the predicted allreduce is a decoy and goes through its identity round.
// - Every rank must predict: TIDEGATE_NATIVE_PREDICTION off on any rank turns it off on all of
//   them at creation (Communicator::connect).
//
// Bits: the predicted collective reduces count + 1 elements, and MPI may pick another algorithm
// (another summation order) for count + 1 than for count: Open MPI 4.1 did at 16383 float32 on
// 5 ranks. Every rank still ends with the same bits, but a predicted op's float sum can differ
// in its last bits from the same op run with its identity round (as it can when the plan moves
// between algorithms).
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

#include "collectives/allreduce/predicted_native.h"
#include "collectives/collective_args.h"
#include "select/planner.h"

namespace tidegate {

// Above this size the identity round is a small part of the op, and the staging copies are not.
inline constexpr size_t kMaxPredictedBytes = size_t{256} << 10;
// The longest sequence of ops found to repeat (a training step of up to this many collectives).
inline constexpr size_t kMaxPeriod = 256;

class NativePredictor {
 public:
  // `world_size`: the communicator's size (a uint8 SUM flag limits it).
  explicit NativePredictor(int world_size);

  // The prediction for the next op planned, if the records before it make one.
  std::optional<NativePrediction> next() const;

  // An op's record: the native allreduce a prediction may repeat, or nothing ("other"). An op
  // is the one a prediction expects exactly when its record equals the prediction.
  using Record = std::optional<NativePrediction>;

  // Records an op just planned (every op but a re-planning round), in posting order, and
  // returns its record. Costs kMaxPeriod record comparisons.
  Record note_planned(const CollectiveArgs& args, const PlanDecision& decision);

 private:
  Record as_record(const CollectiveArgs& args, const PlanDecision& decision) const;
  // The record `back` ops before the newest (back = 1: the newest).
  const Record& record(size_t back) const { return history_[history_.size() - back]; }

  int world_size_;
  std::deque<Record> history_;  // the last kMaxPeriod records, oldest first
  // repeats_[L]: how many of the newest records each equal the record L before them (index 0
  // unused). The last L records repeat the L before them when repeats_[L] >= L.
  std::vector<size_t> repeats_;
};

}  // namespace tidegate
