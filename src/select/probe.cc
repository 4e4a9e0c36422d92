#include "select/probe.h"

#include <algorithm>

#include "base/log.h"
#include "select/codec_probe.h"
#include "select/probe_cache.h"
#include "select/probe_exchange.h"
#include "select/probe_measure.h"

namespace tidegate {

namespace {

// Store keys (the store is comm-scoped). Rank 0 publishes the mode ("cache" or "measure")
// before anyone measures, so either every rank measures or none does; measured figures go
// under figures/<rank>, and the combined profile under agreed. A rank that fails publishes
// "error <message>" instead, so that the others fail at once rather than at the deadline.
constexpr char kModeKey[] = "probe/mode";
constexpr char kAgreedKey[] = "probe/agreed";
constexpr char kErrorPrefix[] = "error ";
// The codecs' throughputs may use this share of the budget, counted from the probe's start; the
// transports' shares are counted from the same start, so they absorb what the codecs used.
constexpr double kCodecBudgetShare = 0.25;

std::string figures_key(int rank) { return "probe/figures/" + std::to_string(rank); }
std::string who(int rank) { return "rank " + std::to_string(rank); }

bool is_error_text(const std::string& text) { return text.rfind(kErrorPrefix, 0) == 0; }
std::string error_reason(const std::string& text) { return text.substr(sizeof kErrorPrefix - 1); }

std::vector<std::string> transport_names(const ProbeInputs& inputs) {
  std::vector<std::string> names;
  for (const Transport* transport : inputs.transports) names.emplace_back(transport->name());
  return names;
}

Status check_inputs(const ProbeInputs& inputs) {
  TG_CHECK_ARG(inputs.config != nullptr, "run_probe needs a config");
  TG_CHECK_ARG(inputs.size >= 1, "run_probe: size must be at least 1");
  TG_CHECK_ARG(inputs.rank >= 0 && inputs.rank < inputs.size, "run_probe: rank out of range");
  TG_CHECK_ARG(inputs.size == 1 || inputs.store != nullptr,
               "run_probe needs a store for several ranks");
  for (const Transport* transport : inputs.transports) {
    TG_CHECK_ARG(transport != nullptr, "run_probe: null transport");
  }
  return Status::ok();
}

// Rank 0 only: the cached profile when TIDEGATE_PROBE_CACHE names a file that fits.
bool load_cache(const ProbeInputs& inputs, const std::vector<std::string>& names,
                ProbeProfile* cached) {
  const std::string& path = inputs.config->raw("TIDEGATE_PROBE_CACHE");
  if (path.empty()) return false;
  std::string why;
  switch (load_probe_cache(path, inputs.size, names, cached, &why)) {
    case CacheLoad::kLoaded:
      TG_LOG(kInfo, who(0), "bandwidth probe: using the cached profile in " + path);
      return true;
    case CacheLoad::kMissing:
      TG_LOG(kInfo, who(0),
             "bandwidth probe: no cache in " + path + " yet (" + why + "); measuring");
      return false;
    case CacheLoad::kMismatch:
      TG_LOG(kInfo, who(0),
             "bandwidth probe: not using the cache " + path + ": " + why + "; measuring");
      return false;
    case CacheLoad::kMalformed:
      break;
  }
  TG_LOG(kWarn, who(0),
         "bandwidth probe: ignoring the cache file " + path +
             ", which is not a valid "
             "profile (" +
             why + "); measuring again and overwriting it");
  return false;
}

// Rank 0 decides and publishes; the others learn whether to measure.
Status agree_on_mode(const ProbeInputs& inputs, const std::vector<std::string>& names,
                     bool* use_cache, std::string* cached_text) {
  if (inputs.rank == 0) {
    ProbeProfile cached;
    *use_cache = load_cache(inputs, names, &cached);
    if (*use_cache) *cached_text = cached.to_text();
    if (inputs.size == 1) return Status::ok();
    if (*use_cache) TG_RETURN_IF_ERROR(inputs.store->set(kAgreedKey, *cached_text));
    return inputs.store->set(kModeKey, *use_cache ? "cache" : "measure");
  }
  std::string mode;
  Status got = inputs.store->get(kModeKey, inputs.deadline, &mode);
  if (!got.is_ok())
    return std::move(got).with_context("bandwidth probe: waiting for rank 0's mode: ");
  *use_cache = mode == "cache";
  return Status::ok();
}

// This rank's own figures: the reduction and the codecs first (the codecs within their share of
// the budget), then every transport, the rest of the budget split evenly between them.
Status measure_here(const ProbeInputs& inputs, Clock::time_point start, ProbeProfile* mine) {
  mine->size = inputs.size;
  mine->source = "measured";
  mine->reduce_GBps = measure_reduce_GBps();
  mine->codecs = measure_codecs(static_cast<double>(inputs.config->probe_budget_ms()) *
                                kCodecBudgetShare);
  // Transport i aims to be done by (i+1)/n of the budget, counted from the probe's start.
  const double share_ms = static_cast<double>(inputs.config->probe_budget_ms()) /
                          static_cast<double>(std::max<size_t>(inputs.transports.size(), 1));
  for (size_t i = 0; i < inputs.transports.size(); ++i) {
    ProbeWire wire(inputs.transports[i], inputs.rank, inputs.size, inputs.comm_id, inputs.deadline);
    TransportFigures figures;
    const double until_ms = share_ms * static_cast<double>(i + 1);
    TG_RETURN_IF_ERROR(measure_transport(&wire, start, until_ms, &figures));
    mine->transports.push_back(figures);
  }
  mine->probe_ms = ms_since(start);
  return Status::ok();
}

// Folds one rank's figures into the combined profile: the slowest link and the slowest
// reduction bound a collective, so latencies take the maximum and throughputs the minimum.
Status fold(int rank, const ProbeProfile& theirs, ProbeProfile* combined) {
  if (theirs.size != combined->size || theirs.transports.size() != combined->transports.size()) {
    return mismatch_error(
        "bandwidth probe: " + who(rank) + " measured " + std::to_string(theirs.transports.size()) +
        " transports for " + std::to_string(theirs.size) + " ranks, rank 0 " +
        std::to_string(combined->transports.size()) + " for " + std::to_string(combined->size));
  }
  combined->reduce_GBps = std::min(combined->reduce_GBps, theirs.reduce_GBps);
  // Codecs every rank measured, at the slowest rank's throughput.
  std::vector<CodecFigures> codecs;
  for (const CodecFigures& c : combined->codecs) {
    const CodecFigures* other = theirs.find_codec(c.codec);
    if (other == nullptr) continue;
    codecs.push_back({c.codec, std::min(c.encode_GBps, other->encode_GBps),
                      std::min(c.decode_GBps, other->decode_GBps)});
  }
  combined->codecs = std::move(codecs);
  combined->probe_ms = std::max(combined->probe_ms, theirs.probe_ms);
  for (size_t i = 0; i < theirs.transports.size(); ++i) {
    const TransportFigures& t = theirs.transports[i];
    TransportFigures& c = combined->transports[i];
    if (t.transport != c.transport) {
      return mismatch_error("bandwidth probe: " + who(rank) + " has transport '" + t.transport +
                            "' where rank 0 has '" + c.transport + "'");
    }
    c.alpha_us = std::max(c.alpha_us, t.alpha_us);
    c.bandwidth_GBps = std::min(c.bandwidth_GBps, t.bandwidth_GBps);
    c.native_alpha_us = std::max(c.native_alpha_us, t.native_alpha_us);
    c.native_bandwidth_GBps = std::min(c.native_bandwidth_GBps, t.native_bandwidth_GBps);
    c.native_max_bytes = std::min(c.native_max_bytes, t.native_max_bytes);
  }
  return Status::ok();
}

// Rank 0: gathers every rank's figures and returns the combined text (or the first error).
Status combine(const ProbeInputs& inputs, const ProbeProfile& mine, std::string* agreed) {
  ProbeProfile combined = mine;
  for (int rank = 1; rank < inputs.size; ++rank) {
    std::string text;
    Status got = inputs.store->get(figures_key(rank), inputs.deadline, &text);
    if (!got.is_ok()) {
      return std::move(got).with_context("bandwidth probe: waiting for " + who(rank) +
                                         "'s figures: ");
    }
    if (is_error_text(text)) {
      return aborted_error("bandwidth probe failed on " + who(rank) + ": " + error_reason(text));
    }
    ProbeProfile theirs;
    Status parsed = ProbeProfile::parse(text, &theirs);
    if (!parsed.is_ok()) {
      return std::move(parsed).with_context("bandwidth probe: " + who(rank) + "'s figures: ");
    }
    TG_RETURN_IF_ERROR(fold(rank, theirs, &combined));
  }
  // Figures whose native part some rank could not measure are not offered at all.
  for (TransportFigures& t : combined.transports) {
    if (t.native_bandwidth_GBps <= 0)
      t.native_alpha_us = t.native_bandwidth_GBps = t.native_max_bytes = 0;
  }
  *agreed = combined.to_text();
  const std::string& path = inputs.config->raw("TIDEGATE_PROBE_CACHE");
  if (!path.empty()) {
    Status saved = save_probe_cache(path, combined);
    if (!saved.is_ok())
      TG_LOG(kWarn, who(0), "bandwidth probe: not caching the profile: " + saved.message());
  }
  return Status::ok();
}

// Measures on every rank and agrees through the store; *agreed is the same text everywhere.
Status measure_and_agree(const ProbeInputs& inputs, Clock::time_point start, std::string* agreed) {
  ProbeProfile mine;
  Status measured = measure_here(inputs, start, &mine);
  if (inputs.size == 1) {
    if (measured.is_ok()) TG_RETURN_IF_ERROR(combine(inputs, mine, agreed));
    return measured;
  }
  if (inputs.rank != 0) {
    const std::string text =
        measured.is_ok() ? mine.to_text() : kErrorPrefix + measured.to_string();
    TG_RETURN_IF_ERROR(inputs.store->set(figures_key(inputs.rank), text));
    TG_RETURN_IF_ERROR(measured);
    Status got = inputs.store->get(kAgreedKey, inputs.deadline, agreed);
    if (!got.is_ok())
      return std::move(got).with_context("bandwidth probe: waiting for rank 0's profile: ");
    if (is_error_text(*agreed)) return aborted_error(error_reason(*agreed));
    return Status::ok();
  }
  Status combined = measured.is_ok() ? combine(inputs, mine, agreed) : measured;
  if (!combined.is_ok()) {
    // Tell the others, who wait for the agreed profile, so they fail now with the reason.
    Status told = inputs.store->set(kAgreedKey, kErrorPrefix + combined.to_string());
    (void)told;
    return combined;
  }
  return inputs.store->set(kAgreedKey, *agreed);
}

}  // namespace

Status run_probe(const ProbeInputs& inputs, ProbeProfile* profile) {
  TG_RETURN_IF_ERROR(check_inputs(inputs));
  const std::vector<std::string> names = transport_names(inputs);
  if (!inputs.config->probe_enabled()) {
    *profile = ProbeProfile::defaults(inputs.size, names);
    return Status::ok();
  }
  const Clock::time_point start = Clock::now();
  bool use_cache = false;
  std::string agreed;
  TG_RETURN_IF_ERROR(agree_on_mode(inputs, names, &use_cache, &agreed));
  if (use_cache && inputs.rank != 0) {
    Status got = inputs.store->get(kAgreedKey, inputs.deadline, &agreed);
    if (!got.is_ok())
      return std::move(got).with_context("bandwidth probe: waiting for the cached profile: ");
  } else if (!use_cache) {
    TG_RETURN_IF_ERROR(measure_and_agree(inputs, start, &agreed));
  }
  ProbeProfile parsed;
  Status st = ProbeProfile::parse(agreed, &parsed);
  if (!st.is_ok()) return std::move(st).with_context("bandwidth probe: the agreed profile: ");
  *profile = std::move(parsed);
  if (inputs.rank == 0) TG_LOG(kInfo, who(0), "bandwidth probe: " + profile->to_json());
  return Status::ok();
}

}  // namespace tidegate
