// The planner's part for compressed allreduces with codec "auto": a codec plan per allow-list
// (codec_plan.h), the choice per op, and its online re-planning.
//
// Re-planning a codec plan follows the dense plan's (planner.h), with one difference that
// keeps "never slower than dense" within one interval: dense's price is known without trying
// it under the section (the dense plan's choice, priced by the model from the probe's figures
// and corrected by the dense plan's own agreed measurements at that size when it has them), so
// an entry whose codec measured slower than dense goes back to dense at once, without first
// trying dense for an interval. A codec is tried again only if dense then measures slower than the
// codec's agreed measurement.
#include <cmath>

#include "select/planner.h"

namespace tidegate {

Status Planner::section_for(const std::vector<std::shared_ptr<const Codec>>& allowed,
                            size_t* index) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The same codec objects as before (the API caches parsed allow-lists): found without
  // building the key, which formats every codec's spec.
  for (size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i]->allowed == allowed) {
      *index = i;
      return Status::ok();
    }
  }
  const std::string key = allow_list_text(allowed);
  for (size_t i = 0; i < sections_.size(); ++i) {
    if (sections_[i]->key == key) {
      *index = i;
      return Status::ok();
    }
  }
  auto section = std::make_unique<CodecSection>();
  section->key = key;
  section->allowed = allowed;
  TG_RETURN_IF_ERROR(CodecPlan::build(inputs_, plan_, allowed, &section->plan));
  section->overrides.assign(section->plan.entries().size(), -1);
  section->first_slot = local_.size() / 2;
  const size_t slots = section->plan.entries().size() * kTrackedChoices;
  local_.resize(local_.size() + 2 * slots, 0.0);
  agreed_.resize(agreed_.size() + 2 * slots, 0.0);
  sections_.push_back(std::move(section));
  *index = sections_.size() - 1;
  return Status::ok();
}

Status Planner::codec_plan(const std::vector<std::shared_ptr<const Codec>>& allowed,
                           CodecPlan* plan) const {
  // A fresh copy: sections (and their statistics slots) are made only by the ops themselves,
  // so that a describing call on one rank cannot change what the re-planning rounds exchange.
  return CodecPlan::build(inputs_, plan_, allowed, plan);
}

std::string Planner::codec_plan_tables() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (const auto& section : sections_) {
    text += section->plan.to_table();
    for (size_t e = 0; e < section->overrides.size(); ++e) {
      if (section->overrides[e] < 0) continue;
      const CodecPlanEntry& entry = section->plan.entries()[e];
      text +=
          "  online: " + std::to_string(entry.min_bytes) + ".." +
          (entry.max_bytes == INT64_MAX ? std::string("inf") : std::to_string(entry.max_bytes)) +
          " B now runs " + entry.ranked[static_cast<size_t>(section->overrides[e])].name() +
          " (measured)\n";
    }
  }
  return text;
}

Status Planner::choose_auto(const CollectiveArgs& args, PlanDecision* decision) {
  size_t index = 0;
  TG_RETURN_IF_ERROR(section_for(args.compression.allowed, &index));
  const CodecPlanEntry* entry = nullptr;
  int first = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CodecSection& section = *sections_[index];
    entry = section.plan.find(plan_bytes(args));
    if (entry == nullptr) return internal_error("codec plan has no entry for the size");
    const size_t e = static_cast<size_t>(entry - section.plan.entries().data());
    first = section.overrides[e] >= 0 ? section.overrides[e] : 0;
    decision->codec_entry = static_cast<int>(e);
  }
  const bool has_shape = args.input.rows > 0 && args.input.cols > 0;
  const int n = static_cast<int>(entry->ranked.size());
  for (int k = -1; k < n; ++k) {
    const int c = k < 0 ? first : k;
    if (k == first) continue;
    const CodecChoice& choice = entry->ranked[static_cast<size_t>(c)];
    if (!choice.dense() && choice.codec->id() == CodecId::kPowerSgd && !has_shape) continue;
    if (choice.dense()) {
      CollectiveArgs dense = args;
      dense.compression = CompressionArgs();
      TG_RETURN_IF_ERROR(choose(dense, decision));
      decision->codec = nullptr;
    } else {
      decision->transport_index = choice.transport_index;
      decision->transport = choice.transport;
      decision->algorithm = choice.algorithm;
      decision->predicted_us = choice.predicted_us;
      decision->entry_index = decision->choice_index = -1;
      decision->codec = choice.codec;
    }
    decision->codec_section = static_cast<int>(index);
    decision->codec_choice = c;
    return Status::ok();
  }
  return internal_error("codec plan entry without a runnable choice");
}

void Planner::record_codec(const CollectiveArgs& args, const PlanDecision& decision,
                           double measured_us) {
  if (decision.codec_entry < 0 || decision.codec_choice < 0 || measured_us <= 0) return;
  if (static_cast<size_t>(decision.codec_choice) >= kTrackedChoices) return;
  const CodecSection& section = *sections_[static_cast<size_t>(decision.codec_section)];
  const CodecPlanEntry& entry = section.plan.entries()[static_cast<size_t>(decision.codec_entry)];
  const double predicted =
      section.plan.cost(entry.ranked[static_cast<size_t>(decision.codec_choice)], plan_bytes(args));
  if (!(predicted > 0)) return;
  const size_t k = section.first_slot +
                   static_cast<size_t>(decision.codec_entry) * kTrackedChoices +
                   static_cast<size_t>(decision.codec_choice);
  local_[2 * k] += std::log(measured_us / predicted);
  local_[2 * k + 1] += 1.0;
}

bool Planner::replan_codec_entry(CodecSection& section, size_t e) {
  const CodecPlanEntry& entry = section.plan.entries()[e];
  if (entry.tuned) return false;
  const double min_count = 2.0 * inputs_.size;
  const size_t n = std::min(entry.ranked.size(), kTrackedChoices);
  std::vector<double> ratio(n, 0.0);  // 0: not measured enough
  for (size_t c = 0; c < n; ++c) {
    const size_t k = section.first_slot + e * kTrackedChoices + c;
    if (agreed_[2 * k + 1] >= min_count) ratio[c] = std::exp(agreed_[2 * k] / agreed_[2 * k + 1]);
  }
  const size_t current = section.overrides[e] >= 0 ? static_cast<size_t>(section.overrides[e]) : 0;
  if (current >= n || ratio[current] == 0) return false;
  // Dense not measured under this section: the dense plan's own agreed measurement of its
  // choice at this size, when it has one (the model can be far off for small messages on a
  // shaped link, whose token bucket lets a burst through at line rate), else the model's.
  auto dense_ratio = [&]() {
    const int64_t bytes = representative_bytes(entry.min_bytes, entry.max_bytes);
    const PlanEntry* d = plan_.find(OpKind::kAllreduce, TIDEGATE_MEMORY_HOST, bytes);
    if (d == nullptr) return 1.0;
    const size_t de = static_cast<size_t>(d - plan_.entries().data());
    const size_t choice = overrides_[de] >= 0 ? static_cast<size_t>(overrides_[de]) : 0;
    if (choice >= kTrackedChoices) return 1.0;
    const size_t k = slot(de, choice);
    return agreed_[2 * k + 1] >= min_count ? std::exp(agreed_[2 * k] / agreed_[2 * k + 1]) : 1.0;
  };
  // Measured choices at their corrected price; dense, unmeasured here, as above.
  auto price = [&](size_t c) {
    const double r = ratio[c] > 0 ? ratio[c] : (entry.ranked[c].dense() ? dense_ratio() : 0.0);
    return r > 0 ? entry.ranked[c].predicted_us * r : -1.0;
  };
  size_t best = current;
  for (size_t c = 0; c < n; ++c) {
    if (price(c) > 0 && price(c) * 1.05 < price(best)) best = c;
  }
  if (best != current) {
    section.overrides[e] = static_cast<int>(best);
    return true;
  }
  // A choice slower than predicted by more than the margin: an untried codec may be tried
  // (as the dense plan does), never one that already measured worse, and only one expected to
  // undercut what the current choice measured (the dense plan's rule, planner.cc: a slowdown
  // every choice shares, such as the busy host's per-op cost, says nothing for the alternative).
  // Another algorithm of the same codec shares the codec's figures, the part of the model most
  // often off (the probe times a codec alone on an idle core; on the emulated cluster 4 ranks
  // share 2), so it is expected to be off alike: its prediction is scaled by what the current
  // choice measured over its own. Without this, top-k's allgather, measured slower than its
  // prediction by more than the margin, made the plan try the sparse reduce-scatter at 64 MiB on
  // the emulated 10 Gbit/s and unshaped links, and both sweeps ended on it.
  if (ratio[current] <= 1.0 + inputs_.config->replan_margin()) return false;
  const CodecChoice& now = entry.ranked[current];
  const double measured = now.predicted_us * ratio[current];
  for (size_t c = 0; c < n; ++c) {
    const CodecChoice& other = entry.ranked[c];
    if (ratio[c] != 0 || other.dense()) continue;
    const bool same_codec = !now.dense() && other.codec->spec() == now.codec->spec();
    const double expected = other.predicted_us * (same_codec ? ratio[current] : 1.0);
    if (expected < measured) {
      section.overrides[e] = static_cast<int>(c);
      return true;
    }
  }
  return false;
}

}  // namespace tidegate
