#include "select/codec_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "select/codec_probe.h"
#include "select/plan_text.h"

namespace tidegate {

namespace {

// The grid of the dense plan: 0, then [2^k, 2^(k+1) - 1] up to 2^40, then one open bucket.
constexpr int kGridTopExponent = 40;
constexpr size_t kRankedKeep = 3;
// A codec must beat dense by more than the model's noise to rank above it (plan.cc's tie
// margin): compressing for a predicted 2% is a loss of accuracy for nothing measurable.
constexpr double kDenseMargin = 1.05;
// And by one more latency of the identity check on top: a compressed op runs one phase more
// than dense and sets up its codec, which the formulas do not see and which measured about
// that much on small messages (emulated cluster, 4-64 KiB); where it decides, the choice is
// so close that dense, exact, is the better bet. A ranking bias only: predicted_us stays the
// model's, so re-planning compares measurements with the model alone.
double ranking_bias_us(const PlanInputs& inputs) { return identity_check_cost(inputs); }

// Adjacent size buckets with the same ranking share an entry only up to this span (largest
// size over smallest) once past kMergeFreeBytes: re-planning judges an entry by what its ops
// measured, and a codec that loses to dense at 16 KiB (its fixed costs) says nothing of it at
// 64 MiB, where it may be ten times faster. An entry from 8 KiB to the top of the grid once
// went dense at every size after one measurement at 16 KiB.
constexpr int64_t kMergeSpan = 4;
constexpr int64_t kMergeFreeBytes = 4096;

// `codec` with `algorithm` on the inputs' transport t.
CodecChoice choice_on(const PlanInputs& inputs, const std::shared_ptr<const Codec>& codec,
                      const AlgorithmRow* algorithm, size_t t) {
  CodecChoice c;
  c.codec = codec;
  c.algorithm = algorithm;
  c.transport_index = static_cast<int>(t);
  c.transport = inputs.transports[t].name;
  return c;
}

// A tensor of `bytes` of float32 for the codec's exact payload bound: PowerSGD is priced on a
// square matrix (a tensor without a 2-D shape does not run it: planner.cc).
TensorView like_tensor(int64_t bytes) {
  TensorView like;
  like.count = bytes / static_cast<int64_t>(sizeof(float));
  like.dtype = TIDEGATE_FLOAT32;
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(like.count)));
  if (side > 0 && side * side == like.count) like.rows = like.cols = side;
  if (like.rows == 0 && like.count > 0) {
    like.rows = 1;
    like.cols = like.count;
  }
  return like;
}

}  // namespace

std::string CodecChoice::name() const {
  if (dense()) return "dense";
  return transport + "/" + algorithm->name + "+" + codec->spec();
}

std::string allow_list_text(const std::vector<std::shared_ptr<const Codec>>& allowed) {
  std::string text;
  for (const auto& codec : allowed) text += (text.empty() ? "" : ",") + codec->spec();
  return text;
}

double CodecPlan::cost(const CodecChoice& choice, int64_t bytes) const {
  if (choice.dense()) {
    const PlanEntry* entry = dense_->find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, bytes);
    if (entry == nullptr) return -1;
    return plan_choice_cost(inputs_, entry->ranked.front(), OpKind::kAllreduce, bytes);
  }
  return compressed_cost(inputs_, choice, bytes);
}

double CodecPlan::compressed_cost(const PlanInputs& inputs_, const CodecChoice& choice,
                                  int64_t bytes) {
  const TransportFigures* link = inputs_.profile.find(choice.transport);
  if (link == nullptr) return -1;
  CostQuery query{OpKind::kAllreduce, bytes, inputs_.size};
  CostTerms terms;
  if (!cost_terms(inputs_.profile, *link, query, &terms)) return -1;
  const std::string family = codec_name(choice.codec->id());
  const CodecFigures* measured = inputs_.profile.find_codec(family);
  const CodecFigures figures = measured != nullptr ? *measured : nominal_codec_figures(family);
  if (!(figures.encode_GBps > 0) || !(figures.decode_GBps > 0)) return -1;
  terms.encode = 1.0 / (figures.encode_GBps * 1e3);
  terms.decode = 1.0 / (figures.decode_GBps * 1e3);
  terms.payload_ratio =
      bytes > 0 ? static_cast<double>(choice.codec->max_payload_bytes(like_tensor(bytes))) /
                      static_cast<double>(bytes)
                : 1.0;
  double us = choice.algorithm->cost(terms, static_cast<double>(bytes), inputs_.size);
  if (us < 0 || !std::isfinite(us)) return -1;
  if (inputs_.size == 1) us = 0.1;
  return us + identity_check_cost(inputs_);
}

int compressed_transport(const PlanInputs& inputs, const std::shared_ptr<const Codec>& codec,
                         const AlgorithmRow* algorithm, int64_t bytes) {
  std::vector<std::pair<int, double>> priced;  // host transports in table order
  double cheapest = -1;
  double first_GBps = -1;  // the first host transport's probed bandwidth
  for (size_t t = 0; t < inputs.transports.size(); ++t) {
    if (!inputs.transports[t].capabilities.host_memory) continue;
    const TransportFigures* link = inputs.profile.find(inputs.transports[t].name);
    const double GBps = link != nullptr ? link->bandwidth_GBps : -1;
    if (first_GBps < 0) {
      first_GBps = GBps;
    } else if (GBps <= first_GBps * kSameLinkBandwidth) {
      continue;  // the same link within the probe's noise: the first keeps the op
    }
    const double us =
        CodecPlan::compressed_cost(inputs, choice_on(inputs, codec, algorithm, t), bytes);
    if (us < 0) continue;
    priced.emplace_back(static_cast<int>(t), us);
    if (cheapest < 0 || us < cheapest) cheapest = us;
  }
  for (const auto& [index, us] : priced) {
    if (us <= cheapest * kCompressedTransportTie) return index;
  }
  return -1;
}

Status CodecPlan::build(const PlanInputs& inputs, const Plan& dense,
                        std::vector<std::shared_ptr<const Codec>> allowed, CodecPlan* plan) {
  CodecPlan built;
  built.inputs_ = inputs;
  built.dense_ = &dense;
  built.allowed_ = std::move(allowed);

  // Every (codec, compressed algorithm) candidate, in allow-list and table order (the order that
  // breaks ties); each size's transport is the one a forced codec would run on
  // (compressed_transport).
  std::vector<std::pair<std::shared_ptr<const Codec>, const AlgorithmRow*>> candidates;
  for (const auto& codec : built.allowed_) {
    for (const AlgorithmRow* row : algorithms_for(OpKind::kAllreduce)) {
      if (row->runs(codec.get())) candidates.emplace_back(codec, row);
    }
  }
  // TIDEGATE_TUNE codec rules: parsed once, checked against the allow-list.
  struct Forced {
    const TuneRule* rule;
    std::shared_ptr<const Codec> codec;  // nullptr: dense
  };
  std::vector<Forced> forced;
  for (const TuneRule& rule : inputs.tune) {
    if (rule.codec.empty()) continue;
    if (rule.kind && *rule.kind != OpKind::kAllreduce) continue;
    if (rule.memory && *rule.memory != TIDEGATE_MEMORY_HOST) continue;
    std::unique_ptr<Codec> parsed;
    Status st = make_codec(rule.codec, &parsed);
    if (!st.is_ok()) {
      return config_error("TIDEGATE_TUNE rule '" + rule.text + "': " + st.message());
    }
    if (parsed->id() == CodecId::kNone) {
      forced.push_back({&rule, nullptr});
      continue;
    }
    std::shared_ptr<const Codec> match;
    for (const auto& codec : built.allowed_) {
      if (codec->spec() == parsed->spec()) match = codec;
    }
    if (match == nullptr) {
      return config_error("TIDEGATE_TUNE rule '" + rule.text + "' forces codec " + parsed->spec() +
                          ", which the allow-list (" + allow_list_text(built.allowed_) +
                          ") does not hold: auto never uses a codec the caller did not allow");
    }
    forced.push_back({&rule, match});
  }

  std::vector<int64_t> starts{0};
  for (int k = 0; k <= kGridTopExponent; ++k) starts.push_back(int64_t{1} << k);
  for (const Forced& f : forced) {
    starts.push_back(f.rule->min_bytes);
    if (f.rule->max_bytes < INT64_MAX) starts.push_back(f.rule->max_bytes + 1);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());

  for (size_t b = 0; b < starts.size(); ++b) {
    CodecPlanEntry e;
    e.min_bytes = starts[b];
    e.max_bytes = b + 1 < starts.size() ? starts[b + 1] - 1 : INT64_MAX;
    const int64_t bytes = representative_bytes(e.min_bytes, e.max_bytes);
    const Forced* rule = nullptr;  // the last codec rule covering the bucket wins
    for (const Forced& f : forced) {
      if (f.rule->min_bytes <= e.min_bytes && e.max_bytes <= f.rule->max_bytes) rule = &f;
    }
    CodecChoice dense_choice;
    dense_choice.predicted_us = std::max(0.0, built.cost(dense_choice, bytes));
    // Scored candidates: dense at its price / margin, codecs at theirs; stable order on ties.
    std::vector<std::pair<double, CodecChoice>> scored;
    scored.emplace_back(dense_choice.predicted_us / kDenseMargin, dense_choice);
    for (const auto& [codec, row] : candidates) {
      if (rule != nullptr && (rule->codec == nullptr || codec != rule->codec)) continue;
      // Without a probe (TIDEGATE_PROBE=off) nothing was measured: dense unless a rule says.
      if (rule == nullptr && inputs.use_size_rule) continue;
      const int t = compressed_transport(inputs, codec, row, bytes);
      if (t < 0) continue;
      CodecChoice c = choice_on(inputs, codec, row, static_cast<size_t>(t));
      const double us = built.cost(c, bytes);
      if (us < 0) continue;
      c.predicted_us = us;
      scored.emplace_back(us + ranking_bias_us(inputs), c);
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    if (rule != nullptr) {
      e.tuned = true;
      // The forced codec's best algorithm and transport first, dense after it (or alone).
      if (rule->codec != nullptr) {
        for (const auto& [score, c] : scored) {
          if (!c.dense()) {
            e.ranked.push_back(c);
            break;
          }
        }
      }
      e.ranked.push_back(dense_choice);
    } else {
      for (const auto& [score, c] : scored) {
        if (e.ranked.size() == kRankedKeep) break;
        e.ranked.push_back(c);
      }
      const bool has_dense = std::any_of(e.ranked.begin(), e.ranked.end(),
                                         [](const CodecChoice& c) { return c.dense(); });
      if (!has_dense) e.ranked.back() = dense_choice;  // dense is always the last resort
    }
    auto same = [](const CodecPlanEntry& a, const CodecPlanEntry& z) {
      if (a.tuned != z.tuned || a.ranked.size() != z.ranked.size()) return false;
      for (size_t i = 0; i < a.ranked.size(); ++i) {
        if (a.ranked[i].name() != z.ranked[i].name()) return false;
      }
      return true;
    };
    auto close = [](const CodecPlanEntry& a, const CodecPlanEntry& z) {
      return z.max_bytes < kMergeFreeBytes ||
             (z.max_bytes != INT64_MAX &&
              z.max_bytes / kMergeSpan < std::max<int64_t>(a.min_bytes, 1));
    };
    if (!built.entries_.empty() && same(built.entries_.back(), e) &&
        close(built.entries_.back(), e)) {
      built.entries_.back().max_bytes = e.max_bytes;
    } else {
      built.entries_.push_back(std::move(e));
    }
  }
  // Prices at each merged entry's own representative size.
  for (CodecPlanEntry& e : built.entries_) {
    const int64_t bytes = representative_bytes(e.min_bytes, e.max_bytes);
    for (CodecChoice& c : e.ranked) c.predicted_us = std::max(0.0, built.cost(c, bytes));
  }
  *plan = std::move(built);
  plan->dense_ = &dense;
  return Status::ok();
}

const CodecPlanEntry* CodecPlan::find(int64_t bytes) const {
  for (const CodecPlanEntry& e : entries_) {
    if (e.min_bytes <= bytes && bytes <= e.max_bytes) return &e;
  }
  return nullptr;
}

std::string CodecPlan::to_table() const {
  std::string text = "codec plan for allow-list: " +
                     (allowed_.empty() ? std::string("(none)") : allow_list_text(allowed_)) + "\n";
  for (const CodecPlanEntry& e : entries_) {
    text += "  allreduce host " + human_bytes(e.min_bytes) + ".." + human_bytes(e.max_bytes) +
            "  " + e.ranked.front().name() + "  " +
            format_number(e.ranked.front().predicted_us, true) + " us";
    if (e.ranked.size() > 1) {
      text += "  runner-up " + e.ranked[1].name() + " " +
              format_number(e.ranked[1].predicted_us, true) + " us";
    }
    if (e.tuned) text += "  tuned";
    text += "\n";
  }
  return text;
}

std::string CodecPlan::to_json() const {
  std::string out = "{\"allowed\":" + json_string(allow_list_text(allowed_)) + ",\"entries\":[";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const CodecPlanEntry& e = entries_[i];
    out += i ? ",{" : "{";
    out += "\"min_bytes\":" + std::to_string(e.min_bytes);
    out += ",\"max_bytes\":" + (e.max_bytes == INT64_MAX ? "null" : std::to_string(e.max_bytes));
    out += std::string(",\"tuned\":") + (e.tuned ? "true" : "false") + ",\"ranked\":[";
    for (size_t j = 0; j < e.ranked.size(); ++j) {
      const CodecChoice& c = e.ranked[j];
      out += j ? ",{" : "{";
      out += "\"choice\":" + json_string(c.name());
      out += ",\"codec\":" + json_string(c.dense() ? "none" : c.codec->spec());
      out += ",\"predicted_us\":" + format_number(c.predicted_us, true) + "}";
    }
    out += "]}";
  }
  return out + "]}";
}

}  // namespace tidegate
