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

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/transport.h"
#include "collectives/collective_args.h"
#include "select/codec_plan.h"
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
  // An "auto" op: the codec plan's choice (codec == nullptr: dense, and the fields above are
  // the dense plan's choice for it), and the codec plan section its statistics belong to.
  std::shared_ptr<const Codec> codec;
  int codec_section = -1;
  int codec_entry = -1;
  int codec_choice = -1;
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

  // For a compressed allreduce with codec "auto" (progress thread): the choice of the codec
  // plan of args' allow-list (built on first use, identically on every rank: every rank posts
  // the same ops): a codec with its compressed algorithm and transport, or dense
  // (decision->codec == nullptr; the rest of *decision is then the dense plan's choice).
  // PowerSGD is skipped for a tensor without a 2-D shape.
  Status choose_auto(const CollectiveArgs& args, PlanDecision* decision);

  // The codec plan an allow-list starts with (tidegate-info, tests; any thread), and the codec
  // plans the ops have used so far with their online changes.
  Status codec_plan(const std::vector<std::shared_ptr<const Codec>>& allowed,
                    CodecPlan* plan) const;
  std::string codec_plan_tables() const;

  // A finished op's wall time on this rank (progress thread).
  void record(const CollectiveArgs& args, const PlanDecision& decision, double measured_us);

  // Length of the re-planning statistics vector (float64): 2 per (plan entry, ranked choice).
  int64_t replan_statistics_count() const;
  // Writes this rank's statistics since the last round (sum of log(measured/predicted), count).
  void fill_replan_statistics(double* out);
  // Applies the statistics summed over all ranks and re-plans the entries where measurements
  // say so. Returns whether any entry's choice changed.
  bool apply_replan_statistics(const double* summed);

  // Predicted microseconds of a dense `kind` of `bytes` (host memory) on the plan's current
  // choice for that size (online changes included); negative when the model cannot price it.
  double price_us(OpKind kind, int64_t bytes) const;

  const ProbeProfile& profile() const { return inputs_.profile; }
  std::string plan_table() const;
  std::string plan_json() const;
  int replans() const;

 private:
  Planner() = default;
  Status choose_compressed(const CollectiveArgs& args, const PlanEntry* entry,
                           PlanDecision* decision) const;
  // A codec plan and its online state; its statistics follow the dense plan's in local_.
  struct CodecSection {
    std::string key;                                    // allow_list_text()
    std::vector<std::shared_ptr<const Codec>> allowed;  // the codec objects it was made for
    CodecPlan plan;
    std::vector<int> overrides;  // per entry, as overrides_
    size_t first_slot = 0;       // of its (entry, choice) slots in local_ / agreed_
  };
  Status section_for(const std::vector<std::shared_ptr<const Codec>>& allowed, size_t* index);
  bool replan_codec_entry(CodecSection& section, size_t entry);
  void record_codec(const CollectiveArgs& args, const PlanDecision& decision, double measured_us);
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
  std::vector<std::unique_ptr<CodecSection>> sections_;  // guarded by mutex_ (for the tables)
};

// Plan key size of an op: the larger of its input and output buffers (allgather keys by the
// gathered output, reduce_scatter by the full input).
int64_t plan_bytes(const CollectiveArgs& args);

}  // namespace tidegate
