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
// The rule. After two consecutive ops that were planned as the same native dense host allreduce
// (same transport, count, dtype, op; at most kMaxPredictedBytes), the next op is predicted to be
// that allreduce again. Every rank then starts that op with the predicted collective, whatever
// its own op is: a rank whose op is the predicted one contributes, any other rank is a decoy.
// If every rank contributed, the op is done; otherwise every rank runs the op as planned (its
// identity round names any mismatch), and the prediction lapses until two ops agree again.
// A re-planning round is neither predicted nor recorded: every rank posts it at the same place.
//
// Why a mismatch is still named on every rank, and never a wrong result or a hang:
// - The predicted collective has the same shape on every rank, so MPI always matches it. The
//   shape is a function of the two ops before, which agree on every rank: the predicted phase
//   starts only after every earlier op finished here (ProgressEngine::advance_op), and a native
//   op finishes only when every rank posted its collective, which a rank does only after its own
//   identity round or predicted collective passed; those checks chain all ranks' headers, so
//   each of the two ops had the same arguments everywhere. (Were they not, they failed, and with
//   them the communicator: the predicted phase never starts.)
// - Whether an op gets a predicted phase at all is decided when it is planned, from those same
//   two ops' arguments and plans, so every rank decides alike whenever they agreed.
// - The verdict (all contributed, or not) is the reduced flag, identical on every rank, so
//   every rank either finishes the op or runs its planned phases. A decoy's zeros never reach a
//   result: a contributing rank writes its output only on the verdict "all contributed".
// - Arguments compared this way: kind, count, dtype, op, memory kind, and the plan's choice
//   (which follows from them on every rank). A broadcast's root, a codec, a collective kind:
//   any op other than the predicted allreduce is a decoy and goes through its identity round.
#pragma once

#include <cstddef>
#include <optional>

#include "collectives/allreduce/predicted_native.h"
#include "collectives/collective_args.h"
#include "select/planner.h"

namespace tidegate {

// Above this size the identity round is a small part of the op, and the staging copies are not.
inline constexpr size_t kMaxPredictedBytes = size_t{256} << 10;

class NativePredictor {
 public:
  // `world_size`: the communicator's size (a uint8 SUM flag limits it).
  explicit NativePredictor(int world_size) : world_size_(world_size) {}

  // The prediction for the next op planned, if the last two ops planned make one.
  std::optional<NativePrediction> next() const;

  // Whether `args`, planned as `decision`, is the op `prediction` expects.
  static bool fulfils(const NativePrediction& prediction, const CollectiveArgs& args,
                      const PlanDecision& decision);

  // Records an op just planned (every op but a re-planning round), in posting order.
  void note_planned(const CollectiveArgs& args, const PlanDecision& decision);

 private:
  // The op as a prediction, if it is one a prediction may repeat.
  std::optional<NativePrediction> as_prediction(const CollectiveArgs& args,
                                                const PlanDecision& decision) const;

  int world_size_;
  std::optional<NativePrediction> last_;
  std::optional<NativePrediction> before_last_;
};

}  // namespace tidegate
