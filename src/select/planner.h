// The planner: the live side of the plan. It holds the agreed probe profile and the plan built
// from it, answers "which transport and algorithm for this op" for the progress engine, and
// refines itself online (DESIGN.md "plan"):
//  - every finished collective's wall time is divided by the model's prediction for its size,
//    and the log of that ratio is summed per (plan entry, ranked choice);
//  - every TIDEGATE_REPLAN_INTERVAL collectives the ranks agree on the sums (an allreduce of
//    the statistics, posted in order like any op), so every rank holds the same numbers;
//  - per entry, a choice's corrected cost is its prediction times its measured ratio. When a
//    measured choice is cheaper than the current one (by 5%), it takes over. When the current
//    choice is slower than predicted by more than TIDEGATE_REPLAN_MARGIN and a ranked
//    alternative has never run, that alternative is tried for the next interval (the model is
//    wrong here, so its ranking is not evidence); it is kept only if it measured cheaper.
// A single correction per (transport, algorithm) would not do: a model error measured at one
// size says little about another, and an untried alternative would look better than a choice
// whose error is known. Every decision uses agreed numbers only, so every rank re-plans alike.
//
// Threading: choose(), record(), fill_replan_statistics() and apply_replan_statistics() run on
// the progress thread; the describing methods may be called from any thread (mutex).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "base/transport.h"
#include "collectives/collective_args.h"
#include "select/plan.h"

namespace tidegate {

struct PlanDecision {
  int transport_index = 0;  // into the communicator's transports
  std::string transport;
  const AlgorithmRow* algorithm = nullptr;
  std::string algorithm_name() const { return algorithm != nullptr ? algorithm->name : ""; }
  double predicted_us = 0;  // at the entry's representative size; 0 when forced or fallback
  int entry_index = -1;     // plan entry and ranked choice the op ran (-1: not from the plan)
  int choice_index = -1;
};

class Planner {
 public:
  // Builds the first plan; CONFIG error from TIDEGATE_TUNE / TIDEGATE_ALGO.
  static Status create(PlanInputs inputs, std::vector<Transport*> transports,
                       std::unique_ptr<Planner>* out);

  // The (transport, algorithm) for `args`: a forced choice in args, else the plan's best choice
  // that the transport can run for this dtype, op and memory kind. UNSUPPORTED when nothing can;
  // CONFIG when args force an algorithm args.kind does not have.
  Status choose(const CollectiveArgs& args, PlanDecision* decision) const;

  // For a dense allreduce inside a compressed op (PowerSGD's factors): the plan's best own
  // (non-native) algorithm for its size on the transport at `transport_index`, or nullptr when
  // the plan ranks none there (the caller then falls back to the size rule).
  const AlgorithmRow* own_algorithm_on(const CollectiveArgs& args, size_t transport_index) const;

  // A finished op's wall time on this rank (progress thread).
  void record(const CollectiveArgs& args, const PlanDecision& decision, double measured_us);

  // Length of the re-planning statistics vector (float64): 2 per (plan entry, ranked choice).
  int64_t replan_statistics_count() const;
  // Writes this rank's statistics since the last round (sum of log(measured/predicted), count).
  void fill_replan_statistics(double* out);
  // Applies the statistics summed over all ranks and re-plans the entries where measurements
  // say so. Returns whether any entry's choice changed.
  bool apply_replan_statistics(const double* summed);

  const ProbeProfile& profile() const { return inputs_.profile; }
  std::string plan_table() const;
  std::string plan_json() const;
  int replans() const;

 private:
  Planner() = default;
  Status choose_compressed(const CollectiveArgs& args, const PlanEntry* entry,
                           PlanDecision* decision) const;
  // Re-plans one entry from the agreed statistics; true when its choice changed.
  bool replan_entry(size_t entry);
  size_t slot(size_t entry, size_t choice) const { return entry * kTrackedChoices + choice; }

  static constexpr size_t kTrackedChoices = 3;

  PlanInputs inputs_;
  std::vector<Transport*> transports_;
  mutable std::mutex mutex_;    // guards overrides_ and replans_
  Plan plan_;                   // built once; online changes live in overrides_
  std::vector<int> overrides_;  // per entry: ranked choice in use (-1 = the model's first)
  int replans_ = 0;
  std::vector<double> local_;   // progress thread: this rank's (log ratio sum, count) per slot
  std::vector<double> agreed_;  // progress thread: the agreed totals per slot
};

// Plan key size of an op: the larger of its input and output buffers (allgather keys by the
// gathered output, reduce_scatter by the full input).
int64_t plan_bytes(const CollectiveArgs& args);

}  // namespace tidegate
