#include "select/planner.h"

#include <cmath>
#include <optional>

#include "select/size_rule.h"

namespace tidegate {

namespace {

std::optional<NativeCollective> native_kind(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce:
      return NativeCollective::kAllreduce;
    case OpKind::kAllgather:
      return NativeCollective::kAllgather;
    case OpKind::kReduceScatter:
      return NativeCollective::kReduceScatter;
    default:
      return std::nullopt;
  }
}

tidegate_memory_t memory_of(const CollectiveArgs& args) {
  return args.input.memory == TIDEGATE_MEMORY_CUDA || args.output.memory == TIDEGATE_MEMORY_CUDA
             ? TIDEGATE_MEMORY_CUDA
             : TIDEGATE_MEMORY_HOST;
}

}  // namespace

int64_t plan_bytes(const CollectiveArgs& args) {
  return static_cast<int64_t>(std::max(args.input.bytes(), args.output.bytes()));
}

Status Planner::create(PlanInputs inputs, std::vector<Transport*> transports,
                       std::unique_ptr<Planner>* out) {
  std::unique_ptr<Planner> planner(new Planner());
  planner->inputs_ = std::move(inputs);
  planner->transports_ = std::move(transports);
  TG_RETURN_IF_ERROR(Plan::build(planner->inputs_, &planner->plan_));
  const size_t entries = planner->plan_.entries().size();
  planner->overrides_.assign(entries, -1);
  planner->local_.assign(2 * entries * kTrackedChoices, 0.0);
  planner->agreed_.assign(2 * entries * kTrackedChoices, 0.0);
  *out = std::move(planner);
  return Status::ok();
}

Status Planner::choose(const CollectiveArgs& args, PlanDecision* decision) const {
  const tidegate_memory_t memory = memory_of(args);
  auto runnable = [&](int index, const AlgorithmRow* algorithm) {
    if (algorithm == nullptr || algorithm->collective != args.kind) return false;
    if (!algorithm->runs(args.compression.codec.get())) return false;
    if (algorithm->native()) {
      std::optional<NativeCollective> kind = native_kind(args.kind);
      return kind.has_value() &&
             transports_[index]->supports_native(*kind, args.input.dtype, args.reduce_op, memory);
    }
    // tidegate's own algorithms reduce and copy on the host.
    return (memory == TIDEGATE_MEMORY_HOST || !algorithm->host_only()) &&
           transports_[index]->capabilities().host_memory;
  };
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < transports_.size(); ++i) {
      if (name == transports_[i]->name()) return static_cast<int>(i);
    }
    return -1;
  };

  std::lock_guard<std::mutex> lock(mutex_);
  const PlanEntry* entry = plan_.find(args.kind, memory, plan_bytes(args));
  if (args.compression.enabled()) return choose_compressed(args, entry, decision);
  if (!args.force_transport.empty() || !args.force_algorithm.empty()) {
    decision->transport = args.force_transport.empty()
                              ? (entry ? entry->ranked.front().transport : transports_[0]->name())
                              : args.force_transport;
    decision->transport_index = index_of(decision->transport);
    if (decision->transport_index < 0) {
      return unsupported("forced transport '" + decision->transport +
                         "' is not one of this communicator's transports");
    }
    decision->algorithm = args.force_algorithm.empty()
                              ? size_rule_algorithm(*inputs_.config, args)
                              : find_algorithm(args.kind, args.force_algorithm);
    if (decision->algorithm == nullptr) {
      return config_error("forced algorithm '" + args.force_algorithm + "' is not one of " +
                          op_kind_name(args.kind) + "'s: " + algorithm_names_text(args.kind));
    }
    decision->predicted_us = 0;
    decision->entry_index = decision->choice_index = -1;  // not the plan's: not recorded
    if (!runnable(decision->transport_index, decision->algorithm)) {
      return unsupported("forced " + decision->transport + "/" + decision->algorithm->name +
                         " cannot run " + op_kind_name(args.kind) +
                         " of this dtype, op and memory");
    }
    return Status::ok();
  }
  if (entry != nullptr) {
    const size_t e = static_cast<size_t>(entry - plan_.entries().data());
    const int first = overrides_[e] >= 0 ? overrides_[e] : 0;
    const int n = static_cast<int>(entry->ranked.size());
    // The choice in use first, then the others in the model's order.
    for (int k = -1; k < n; ++k) {
      const int c = k < 0 ? first : k;
      if (k == first) continue;
      const PlanChoice& choice = entry->ranked[static_cast<size_t>(c)];
      const int index = choice.transport_index;
      if (runnable(index, choice.algorithm)) {
        *decision = {
            index, choice.transport, choice.algorithm, choice.predicted_us, static_cast<int>(e), c};
        return Status::ok();
      }
    }
  }
  // The user restricted this entry (TIDEGATE_ALGO / TIDEGATE_TUNE) to choices that cannot run
  // this dtype or op: say so rather than quietly running something else.
  if (entry != nullptr && entry->tuned) {
    return unsupported(std::string(op_kind_name(args.kind)) + " of " +
                       dtype_name(args.input.dtype) + " (" + reduce_op_name(args.reduce_op) +
                       "): the forced choice " + entry->ranked.front().transport + "/" +
                       entry->ranked.front().algorithm->name +
                       " (TIDEGATE_ALGO / TIDEGATE_TUNE) cannot run it on this transport");
  }
  // No ranked choice fits this dtype/op (e.g. float16 where the plan picked a native MPI
  // allreduce): the fixed size rule on the first transport that takes host memory.
  if (memory == TIDEGATE_MEMORY_HOST) {
    for (size_t i = 0; i < transports_.size(); ++i) {
      if (!transports_[i]->capabilities().host_memory) continue;
      const AlgorithmRow* rule = size_rule_algorithm(*inputs_.config, args);
      if (rule == nullptr) break;
      *decision = {static_cast<int>(i), transports_[i]->name(), rule, 0.0};
      return Status::ok();
    }
  }
  return unsupported(std::string(op_kind_name(args.kind)) + " on " +
                     (memory == TIDEGATE_MEMORY_CUDA ? "CUDA" : "host") +
                     " memory: no transport of this communicator can run it (transports: " +
                     [&] {
                       std::string names;
                       for (Transport* t : transports_)
                         names += std::string(names.empty() ? "" : ", ") + t->name();
                       return names;
                     }() +
                     ")");
}

// A compressed allreduce runs the algorithm its caller named (or its codec's default) on the
// transport the plan picks for a dense allreduce of the same size, so that it uses the link the
// probe found fastest for that size (a native choice lends its transport, whose point-to-point
// messages the compressed algorithms use).
Status Planner::choose_compressed(const CollectiveArgs& args, const PlanEntry* entry,
                                  PlanDecision* decision) const {
  const AlgorithmRow* row = nullptr;
  TG_RETURN_IF_ERROR(compressed_algorithm(args.compression, &row));
  int index = 0;
  if (!args.force_transport.empty()) {
    index = -1;
    for (size_t i = 0; i < transports_.size(); ++i) {
      if (args.force_transport == transports_[i]->name()) index = static_cast<int>(i);
    }
    if (index < 0) {
      return unsupported("forced transport '" + args.force_transport +
                         "' is not one of this communicator's transports");
    }
  } else {
    // Priced for the codec itself, not taken from the dense plan (codec_plan.h says why).
    const int priced = compressed_transport(inputs_, args.compression.codec, row, plan_bytes(args));
    if (priced >= 0) {
      index = priced;
    } else if (entry != nullptr) {
      index = entry->ranked.front().transport_index;
    }
  }
  if (!transports_[static_cast<size_t>(index)]->capabilities().host_memory) index = 0;
  *decision = {index, transports_[static_cast<size_t>(index)]->name(), row, 0.0};
  return Status::ok();
}

const AlgorithmRow* Planner::own_algorithm_on(const CollectiveArgs& args,
                                              size_t transport_index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const PlanEntry* entry = plan_.find(args.kind, memory_of(args), plan_bytes(args));
  if (entry == nullptr) return nullptr;
  for (const PlanChoice& choice : entry->ranked) {
    if (static_cast<size_t>(choice.transport_index) == transport_index &&
        !choice.algorithm->native()) {
      return choice.algorithm;
    }
  }
  return nullptr;
}

void Planner::record(const CollectiveArgs& args, const PlanDecision& decision, double measured_us) {
  if (decision.codec_section >= 0) {
    record_codec(args, decision, measured_us);
    return;
  }
  if (decision.entry_index < 0 || decision.choice_index < 0 || measured_us <= 0) return;
  if (static_cast<size_t>(decision.choice_index) >= kTrackedChoices) return;
  const TransportFigures* link = inputs_.profile.find(decision.transport);
  if (link == nullptr) return;
  // The prediction at the op's own size, so that ops of different sizes in one entry compare.
  const CostQuery query{args.kind, plan_bytes(args), inputs_.size};
  const double predicted = predicted_us(inputs_.profile, *link, *decision.algorithm, query, {});
  if (!(predicted > 0)) return;
  const size_t k =
      slot(static_cast<size_t>(decision.entry_index), static_cast<size_t>(decision.choice_index));
  local_[2 * k] += std::log(measured_us / predicted);
  local_[2 * k + 1] += 1.0;
}

int64_t Planner::replan_statistics_count() const { return static_cast<int64_t>(local_.size()); }

void Planner::fill_replan_statistics(double* out) {
  std::copy(local_.begin(), local_.end(), out);
  std::fill(local_.begin(), local_.end(), 0.0);
}

bool Planner::apply_replan_statistics(const double* summed) {
  for (size_t i = 0; i < agreed_.size(); ++i) agreed_[i] += summed[i];
  std::lock_guard<std::mutex> lock(mutex_);
  bool changed = false;
  for (size_t e = 0; e < overrides_.size(); ++e) changed = replan_entry(e) || changed;
  for (auto& section : sections_) {
    for (size_t e = 0; e < section->overrides.size(); ++e) {
      changed = replan_codec_entry(*section, e) || changed;
    }
  }
  if (changed) ++replans_;
  return changed;
}

bool Planner::replan_entry(size_t e) {
  const PlanEntry& entry = plan_.entries()[e];
  if (entry.tuned) return false;  // the user decided this entry
  // Too few observations say more about noise than about the model: two ops on every rank.
  const double min_count = 2.0 * inputs_.size;
  const size_t n = std::min(entry.ranked.size(), kTrackedChoices);
  std::vector<double> ratio(n, 0.0);  // geometric mean of measured / predicted; 0 = unknown
  for (size_t c = 0; c < n; ++c) {
    const size_t k = slot(e, c);
    if (agreed_[2 * k + 1] >= min_count) ratio[c] = std::exp(agreed_[2 * k] / agreed_[2 * k + 1]);
  }
  const size_t current = overrides_[e] >= 0 ? static_cast<size_t>(overrides_[e]) : 0;
  if (current >= n || ratio[current] == 0) return false;
  auto corrected = [&](size_t c) { return entry.ranked[c].predicted_us * ratio[c]; };
  size_t best = current;
  for (size_t c = 0; c < n; ++c) {
    if (ratio[c] > 0 && corrected(c) * 1.05 < corrected(best)) best = c;
  }
  if (best != current) {
    overrides_[e] = static_cast<int>(best);
    return true;
  }
  // Try a never-measured alternative for one interval only when the model has been shown
  // wrong here: the current choice is slower than predicted by more than the margin. (Trying
  // near-ties as well was measured to cost more than it found: on the emulated 1 Gbit
  // cluster a trial of Rabenseifner, predicted within 1% of the ring at 16 MiB, ran 1.9x
  // slower for a whole interval.)
  //
  // And only an alternative whose own prediction undercuts what the current choice really
  // costs: a slowdown every choice shares (the per-op cost of a busy host, which dominates a
  // small op and which the model does not price) says nothing for an alternative of more
  // message rounds. Without this rule, a noisy interval at 4 B made the plan try Rabenseifner
  // (four rounds) in place of recursive doubling (two) for a whole interval.
  if (ratio[current] <= 1.0 + inputs_.config->replan_margin()) return false;
  for (size_t c = 0; c < n; ++c) {
    if (ratio[c] == 0 && entry.ranked[c].predicted_us < corrected(current)) {
      overrides_[e] = static_cast<int>(c);
      return true;
    }
  }
  return false;
}

std::string Planner::plan_table() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text = plan_.to_table();
  for (size_t e = 0; e < overrides_.size(); ++e) {
    if (overrides_[e] < 0) continue;
    const PlanEntry& entry = plan_.entries()[e];
    const PlanChoice& now = entry.ranked[static_cast<size_t>(overrides_[e])];
    text += std::string("online: ") + op_kind_name(entry.kind) + " " +
            std::to_string(entry.min_bytes) + ".." +
            (entry.max_bytes == INT64_MAX ? std::string("inf") : std::to_string(entry.max_bytes)) +
            " B now runs " + now.transport + "/" + now.algorithm->name + " (measured)\n";
  }
  return text;
}

std::string Planner::plan_json() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_.to_json();
}

int Planner::replans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return replans_;
}

}  // namespace tidegate

namespace tidegate {

double Planner::price_us(OpKind kind, int64_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const PlanEntry* entry = plan_.find(kind, TIDEGATE_MEMORY_HOST, bytes);
  if (entry == nullptr || entry->ranked.empty()) return -1;
  const size_t e = static_cast<size_t>(entry - plan_.entries().data());
  const int current = overrides_[e] >= 0 ? overrides_[e] : 0;
  const size_t c = std::min(static_cast<size_t>(current), entry->ranked.size() - 1);
  return plan_choice_cost(inputs_, entry->ranked[c], kind, bytes);
}

}  // namespace tidegate
