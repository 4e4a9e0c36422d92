#include "select/plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <tuple>

#include "select/plan_text.h"
#include "select/size_rule.h"

namespace tidegate {

namespace {

// Choices kept per entry: the best plus fallbacks for when a dtype or op is not offered by it.
constexpr size_t kRankedKeep = 3;
// The size grid: 0, then [2^k, 2^(k+1)-1] up to 2^40, then one bucket to INT64_MAX.
constexpr int kGridTopExponent = 40;

constexpr OpKind kPlannedKinds[] = {OpKind::kAllreduce,  OpKind::kReduceScatter, OpKind::kAllgather,
                                    OpKind::kAllgatherv, OpKind::kBroadcast,     OpKind::kBarrier,
                                    OpKind::kAlltoallv};

const char* memory_name(tidegate_memory_t memory) {
  return memory == TIDEGATE_MEMORY_CUDA ? "cuda" : "host";
}

bool offers_native(OpKind kind, const TransportCapabilities& caps) {
  return (kind == OpKind::kAllreduce && caps.native_allreduce) ||
         (kind == OpKind::kAllgather && caps.native_allgather) ||
         (kind == OpKind::kReduceScatter && caps.native_reduce_scatter);
}

struct Candidate {
  std::string transport;
  int transport_index = 0;
  const AlgorithmRow* algorithm = nullptr;
  const TransportFigures* figures = nullptr;  // nullptr: the probe has none for the transport
};

// One (collective, memory kind) of the plan and what it may choose from, in transport order
// then algorithm order (the order that breaks ties, identical on every rank).
struct Cell {
  OpKind kind = OpKind::kAllreduce;
  tidegate_memory_t memory = TIDEGATE_MEMORY_HOST;
  std::vector<Candidate> candidates;
  bool size_rule = false;              // top choice from the fixed size rule, not the model
  std::vector<const TuneRule*> rules;  // TUNE rules that apply here, in order
  std::string forced;                  // TIDEGATE_ALGO's algorithm, "" = none
};

// The choices a restriction keeps: a transport and/or an algorithm ("" = any).
struct Restriction {
  std::string transport;
  std::string algorithm;
  bool matches(const Candidate& c) const {
    return (transport.empty() || c.transport == transport) &&
           (algorithm.empty() || algorithm == c.algorithm->name);
  }
};

Restriction restriction_of(const Cell& cell, const TuneRule* rule) {
  Restriction r;
  r.algorithm = cell.forced;
  if (rule != nullptr) {
    r.transport = rule->transport;
    if (!rule->algorithm.empty()) r.algorithm = rule->algorithm;
  }
  return r;
}

bool any_match(const Cell& cell, const Restriction& r) {
  return std::any_of(cell.candidates.begin(), cell.candidates.end(),
                     [&](const Candidate& c) { return r.matches(c); });
}

// "transports: tcp, mpi; algorithms: ring, native" - the valid names for an error message.
std::string valid_names(const Cell& cell) {
  std::set<std::string> seen;
  std::string transports, algorithms;
  for (const Candidate& c : cell.candidates) {
    if (seen.insert("t:" + c.transport).second)
      transports += (transports.empty() ? "" : ", ") + c.transport;
    if (seen.insert(std::string("a:") + c.algorithm->name).second)
      algorithms += (algorithms.empty() ? "" : ", ") + std::string(c.algorithm->name);
  }
  return std::string(op_kind_name(cell.kind)) + " on " + memory_name(cell.memory) +
         " memory offers transports: " + transports + "; algorithms: " + algorithms;
}

// An op planned off the first transport, or onto a native collective, first checks its
// identity on the first transport (engine/progress_engine.cc): a header-only dissemination
// round, priced as the model prices a dissemination barrier there (never corrected: the
// corrections belong to the op's own choice).
double identity_check_us(const PlanInputs& in, const Candidate& c) {
  if (in.size <= 1 || in.transports.empty()) return 0;
  if (c.transport_index == 0 && !c.algorithm->native()) return 0;
  const TransportFigures* first = in.profile.find(in.transports.front().name);
  if (first == nullptr) return 0;
  const double us = predicted_us(in.profile, *first, identity_check_algorithm(),
                                 CostQuery{OpKind::kBarrier, 0, in.size}, Corrections{});
  return std::max(us, 0.0);
}

double cost_of(const PlanInputs& in, const Candidate& c, OpKind kind, int64_t bytes) {
  if (c.figures == nullptr) return -1;
  CostQuery query{kind, bytes, in.size};
  const double us = predicted_us(in.profile, *c.figures, *c.algorithm, query, in.corrections);
  return us < 0 ? us : us + identity_check_us(in, c);
}

Cell make_cell(const PlanInputs& in, OpKind kind, tidegate_memory_t memory) {
  Cell cell;
  cell.kind = kind;
  cell.memory = memory;
  for (size_t t = 0; t < in.transports.size(); ++t) {
    const TransportOffer& offer = in.transports[t];
    bool takes = memory == TIDEGATE_MEMORY_CUDA ? offer.capabilities.cuda_memory
                                                : offer.capabilities.host_memory;
    if (!takes) continue;
    // A native row is a candidate only where the transport's capabilities offer it.
    for (const AlgorithmRow* row : algorithms_for(kind)) {
      if (row->compressed()) continue;  // dense ops only (codecs are chosen by the caller)
      if (row->native() && !offers_native(kind, offer.capabilities)) continue;
      cell.candidates.push_back(
          {offer.name, static_cast<int>(t), row, in.profile.find(offer.name)});
    }
  }
  // The model decides only where it can price something; a cell it cannot price at all (no
  // figures for its transports) falls back to the size rule rather than guessing.
  bool any_priced = std::any_of(cell.candidates.begin(), cell.candidates.end(),
                                [&](const Candidate& c) { return cost_of(in, c, kind, 0) >= 0; });
  cell.size_rule = in.use_size_rule || !any_priced;
  if (!cell.size_rule) {
    std::erase_if(cell.candidates, [&](const Candidate& c) { return cost_of(in, c, kind, 0) < 0; });
  }
  return cell;
}

// Attaches TIDEGATE_ALGO and the TUNE rules that apply to the cell, checking that each leaves
// a choice. `matched` marks rules that found a candidate somewhere.
Status attach_restrictions(const PlanInputs& in, const Config& config, Cell* cell,
                           std::vector<bool>* matched) {
  cell->forced = config.forced_algorithm(op_kind_name(cell->kind));
  if (!cell->forced.empty() && !any_match(*cell, restriction_of(*cell, nullptr))) {
    return config_error("TIDEGATE_ALGO forces " + std::string(op_kind_name(cell->kind)) + "=" +
                        cell->forced + ", which is not a valid choice: " + valid_names(*cell));
  }
  for (size_t i = 0; i < in.tune.size(); ++i) {
    const TuneRule& rule = in.tune[i];
    if (!rule.codec.empty()) {  // the codec plan's (codec_plan.h)
      (*matched)[i] = true;
      continue;
    }
    if (rule.kind && *rule.kind != cell->kind) continue;
    if (rule.memory && *rule.memory != cell->memory) continue;
    if (any_match(*cell, restriction_of(*cell, &rule))) {
      cell->rules.push_back(&rule);
      (*matched)[i] = true;
    } else if (rule.kind && rule.memory) {
      return config_error("TIDEGATE_TUNE rule '" + rule.text +
                          "' leaves no choice: " + valid_names(*cell));
    }
  }
  return Status::ok();
}

// Range starts for the cell: the power-of-two grid plus every boundary of its rules and, under
// the size rule, its thresholds, so that no restriction or threshold falls inside a bucket.
std::vector<int64_t> bucket_starts(const Config& config, const Cell& cell) {
  std::set<int64_t> starts{0};
  for (int k = 0; k <= kGridTopExponent; ++k) starts.insert(int64_t{1} << k);
  for (const TuneRule* rule : cell.rules) {
    starts.insert(rule->min_bytes);
    if (rule->max_bytes < INT64_MAX) starts.insert(rule->max_bytes + 1);
  }
  if (cell.size_rule && cell.kind == OpKind::kAllreduce) {
    if (config.recursive_doubling_max_bytes() < INT64_MAX)
      starts.insert(config.recursive_doubling_max_bytes() + 1);
    starts.insert(config.ring_min_bytes());
  }
  return std::vector<int64_t>(starts.begin(), starts.end());
}

}  // namespace

// Geometric middle of [lo, hi] (an open-ended range counts as [lo, 2 lo]): the size at which
// an entry is priced, representative of a range that spans a factor of two or more.
int64_t representative_bytes(int64_t lo, int64_t hi) {
  if (hi == INT64_MAX) hi = lo > 0 ? lo * 2 : 1;
  double middle =
      std::sqrt(static_cast<double>(std::max<int64_t>(lo, 1))) * std::sqrt(static_cast<double>(hi));
  int64_t bytes = static_cast<int64_t>(middle);
  return std::clamp(bytes, lo, hi);
}

double plan_choice_cost(const PlanInputs& in, const PlanChoice& choice, OpKind kind,
                        int64_t bytes) {
  Candidate c{choice.transport, choice.transport_index, choice.algorithm,
              in.profile.find(choice.transport)};
  return cost_of(in, c, kind, bytes);
}

double identity_check_cost(const PlanInputs& in) {
  if (in.size <= 1 || in.transports.empty()) return 0;
  const TransportFigures* first = in.profile.find(in.transports.front().name);
  if (first == nullptr) return 0;
  const double us = predicted_us(in.profile, *first, identity_check_algorithm(),
                                 CostQuery{OpKind::kBarrier, 0, in.size}, Corrections{});
  return std::max(us, 0.0);
}

namespace {

// Predictions closer than the probe can measure (its bandwidth figures of equal links differ by
// a few percent from run to run) are ties, settled by the table order: the first transport
// (tcp, tidegate's own) and the simpler algorithm. Each pick is the first in table order among
// the candidates left whose price is within 5% of the cheapest left.
constexpr double kTieTolerance = 1.05;
// Ranks the candidates `r` keeps. Key: (not the size rule's pick, no price, price, table
// order); the table order makes ties, and so the plan, identical on every rank.
std::vector<PlanChoice> rank(const PlanInputs& in, const Config& config, const Cell& cell,
                             const Restriction& r, int64_t rule_bytes, int64_t cost_bytes) {
  int pick_transport = -1;
  const AlgorithmRow* pick_algorithm = nullptr;
  if (cell.size_rule && !cell.candidates.empty()) {
    CollectiveArgs args;
    args.kind = cell.kind;
    args.input.dtype = TIDEGATE_UINT8;  // one byte per element: count == bytes
    args.input.count = rule_bytes;
    pick_transport = cell.candidates.front().transport_index;
    pick_algorithm = size_rule_algorithm(config, args);
  }
  using Key = std::tuple<bool, bool, double, size_t>;
  std::vector<std::pair<Key, PlanChoice>> scored;
  for (size_t i = 0; i < cell.candidates.size(); ++i) {
    const Candidate& c = cell.candidates[i];
    if (!r.matches(c)) continue;
    double us = cost_of(in, c, cell.kind, cost_bytes);
    bool pick = c.transport_index == pick_transport && c.algorithm == pick_algorithm;
    Key key{!pick, us < 0, us < 0 ? 0.0 : us, i};
    scored.push_back(
        {key, PlanChoice{c.transport, c.transport_index, c.algorithm, us < 0 ? 0.0 : us}});
  }
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<PlanChoice> ranked;
  std::vector<bool> taken(scored.size(), false);
  while (ranked.size() < kRankedKeep && ranked.size() < scored.size()) {
    size_t cheapest = 0;
    while (taken[cheapest]) ++cheapest;  // sorted: the first left is the cheapest left
    size_t pick = cheapest;
    const Key& best = scored[cheapest].first;
    for (size_t j = cheapest + 1; j < scored.size(); ++j) {
      const Key& k = scored[j].first;
      const bool same_group =
          std::get<0>(k) == std::get<0>(best) && std::get<1>(k) == std::get<1>(best);
      if (taken[j] || !same_group || std::get<2>(k) > std::get<2>(best) * kTieTolerance) continue;
      if (std::get<3>(k) < std::get<3>(scored[pick].first)) pick = j;
    }
    taken[pick] = true;
    ranked.push_back(scored[pick].second);
  }
  return ranked;
}

bool same_choices(const PlanEntry& a, const PlanEntry& b) {
  if (a.tuned != b.tuned || a.ranked.size() != b.ranked.size()) return false;
  for (size_t i = 0; i < a.ranked.size(); ++i) {
    if (a.ranked[i].transport_index != b.ranked[i].transport_index ||
        a.ranked[i].algorithm != b.ranked[i].algorithm) {
      return false;
    }
  }
  return true;
}

// Builds the cell's entries bucket by bucket, then merges neighbours that choose the same
// ranked list and re-prices the merged entry at its own representative size.
void plan_cell(const PlanInputs& in, const Config& config, const Cell& cell,
               std::vector<PlanEntry>* out) {
  std::vector<int64_t> starts = bucket_starts(config, cell);
  std::vector<PlanEntry> entries;
  for (size_t b = 0; b < starts.size(); ++b) {
    PlanEntry e;
    e.kind = cell.kind;
    e.memory = cell.memory;
    e.min_bytes = starts[b];
    e.max_bytes = b + 1 < starts.size() ? starts[b + 1] - 1 : INT64_MAX;
    const TuneRule* rule = nullptr;  // the last rule covering the bucket wins
    for (const TuneRule* candidate : cell.rules) {
      if (candidate->min_bytes <= e.min_bytes && e.max_bytes <= candidate->max_bytes)
        rule = candidate;
    }
    e.tuned = rule != nullptr || !cell.forced.empty();
    e.ranked = rank(in, config, cell, restriction_of(cell, rule), e.min_bytes,
                    representative_bytes(e.min_bytes, e.max_bytes));
    if (!entries.empty() && same_choices(entries.back(), e)) {
      entries.back().max_bytes = e.max_bytes;
    } else {
      entries.push_back(std::move(e));
    }
  }
  for (PlanEntry& e : entries) {
    int64_t bytes = representative_bytes(e.min_bytes, e.max_bytes);
    for (PlanChoice& choice : e.ranked) {
      Candidate c{choice.transport, choice.transport_index, choice.algorithm,
                  in.profile.find(choice.transport)};
      double us = cost_of(in, c, cell.kind, bytes);
      choice.predicted_us = us < 0 ? 0.0 : us;
    }
    out->push_back(std::move(e));
  }
}

Status check_tune_transports(const PlanInputs& in) {
  std::set<std::string> names;
  std::string available;
  for (const TransportOffer& offer : in.transports) {
    names.insert(offer.name);
    available += (available.empty() ? "" : ", ") + offer.name;
  }
  for (const TuneRule& rule : in.tune) {
    if (!rule.transport.empty() && names.count(rule.transport) == 0) {
      return config_error(
          "TIDEGATE_TUNE rule '" + rule.text + "' names transport '" + rule.transport +
          "', which this communicator does not have (available: " + available + ")");
    }
  }
  return Status::ok();
}

std::string choice_name(const PlanChoice& c) { return c.transport + "/" + c.algorithm->name; }

}  // namespace

Status Plan::build(const PlanInputs& inputs, Plan* plan) {
  TG_CHECK_ARG(inputs.size >= 1, "plan: communicator size must be at least 1");
  TG_CHECK_ARG(!inputs.transports.empty(), "plan: no transports to plan over");
  TG_RETURN_IF_ERROR(check_tune_transports(inputs));
  static const Config kDefaultConfig;  // immutable after construction
  const Config& config = inputs.config != nullptr ? *inputs.config : kDefaultConfig;

  std::vector<tidegate_memory_t> memories{TIDEGATE_MEMORY_HOST};
  if (std::any_of(inputs.transports.begin(), inputs.transports.end(),
                  [](const TransportOffer& o) { return o.capabilities.cuda_memory; })) {
    memories.push_back(TIDEGATE_MEMORY_CUDA);
  }
  std::vector<Cell> cells;
  std::vector<bool> matched(inputs.tune.size(), false);
  for (OpKind kind : kPlannedKinds) {
    for (tidegate_memory_t memory : memories) {
      Cell cell = make_cell(inputs, kind, memory);
      if (cell.candidates.empty()) continue;  // no transport takes this memory kind
      TG_RETURN_IF_ERROR(attach_restrictions(inputs, config, &cell, &matched));
      cells.push_back(std::move(cell));
    }
  }
  for (size_t i = 0; i < inputs.tune.size(); ++i) {
    if (matched[i]) continue;
    const TuneRule& rule = inputs.tune[i];
    for (const Cell& cell : cells) {  // name the valid choices of the first cell it targets
      if ((rule.kind && *rule.kind != cell.kind) || (rule.memory && *rule.memory != cell.memory))
        continue;
      return config_error("TIDEGATE_TUNE rule '" + rule.text +
                          "' matches no choice: " + valid_names(cell));
    }
  }
  std::vector<PlanEntry> entries;
  for (const Cell& cell : cells) plan_cell(inputs, config, cell, &entries);
  plan->entries_ = std::move(entries);
  return Status::ok();
}

const PlanEntry* Plan::find(OpKind kind, tidegate_memory_t memory, int64_t bytes) const {
  for (const PlanEntry& e : entries_) {
    if (e.kind == kind && e.memory == memory && e.min_bytes <= bytes && bytes <= e.max_bytes)
      return &e;
  }
  return nullptr;
}

std::string Plan::to_table() const {
  std::vector<std::vector<std::string>> rows{
      {"collective", "memory", "bytes", "choice", "predicted_us", "runner-up", "tuned"}};
  for (const PlanEntry& e : entries_) {
    rows.push_back({op_kind_name(e.kind), memory_name(e.memory),
                    human_bytes(e.min_bytes) + ".." + human_bytes(e.max_bytes),
                    choice_name(e.ranked.front()),
                    format_number(e.ranked.front().predicted_us, true),
                    e.ranked.size() > 1 ? choice_name(e.ranked[1]) : "-", e.tuned ? "yes" : ""});
  }
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  std::string text;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      // Numbers align right, names left.
      std::string pad(widths[i] - row[i].size(), ' ');
      line += (i == 4 ? pad + row[i] : row[i] + pad) + (i + 1 < row.size() ? "  " : "");
    }
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

std::string Plan::to_json() const {
  std::string out = "[";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const PlanEntry& e = entries_[i];
    const PlanChoice& top = e.ranked.front();
    out += i ? ",{" : "{";
    out += "\"collective\":" + json_string(op_kind_name(e.kind));
    out += ",\"memory\":" + json_string(memory_name(e.memory));
    out += ",\"min_bytes\":" + std::to_string(e.min_bytes);
    out += ",\"max_bytes\":" + (e.max_bytes == INT64_MAX ? "null" : std::to_string(e.max_bytes));
    out += ",\"transport\":" + json_string(top.transport);
    out += ",\"algorithm\":" + json_string(top.algorithm->name);
    out += ",\"predicted_us\":" + format_number(top.predicted_us);
    out += std::string(",\"tuned\":") + (e.tuned ? "true" : "false");
    out += ",\"ranked\":[";
    for (size_t j = 0; j < e.ranked.size(); ++j) {
      const PlanChoice& c = e.ranked[j];
      out += (j ? ",{" : "{") + std::string("\"transport\":") + json_string(c.transport) +
             ",\"algorithm\":" + json_string(c.algorithm->name) +
             ",\"predicted_us\":" + format_number(c.predicted_us) + "}";
    }
    out += "]}";
  }
  return out + "]";
}

}  // namespace tidegate
