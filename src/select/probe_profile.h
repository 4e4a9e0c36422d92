// What the bandwidth probe measured, agreed by every rank: per transport the latency (alpha)
// and bandwidth (1/beta) between the ranks, and the local reduction throughput (gamma). The
// planner builds the plan from it, so every rank must hold the same bytes (the probe agrees
// on them through the store; see probe.h). Serialised as text for the store and the cache
// file, and as JSON for tidegate-info.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tidegate {

struct TransportFigures {
  std::string transport;      // "tcp", "mpi", "ucx", "nccl"
  double alpha_us = 0;        // one-way latency of a small message, microseconds
  double bandwidth_GBps = 0;  // sustained per-link bandwidth with every link busy (ring), 1e9 B/s
  // Native collectives measured directly (0 = not measured / not offered): time of a native
  // allreduce at a small and a large size, which the cost model fits like alpha/beta.
  double native_alpha_us = 0;
  double native_bandwidth_GBps = 0;
  // Largest allreduce (bytes) the native figures were fitted on: a vendor collective may switch
  // algorithm above it, so the model does not extrapolate them further (cost_model.cc).
  double native_max_bytes = 0;
};

// A codec's local throughput, per byte of dense float32 input: encoding, and decoding into a
// tensor (decode-add costs about the same), measured at its default spec (codec_probe.h).
struct CodecFigures {
  std::string codec;  // the codec's name ("qsgd"): one figure per codec family
  double encode_GBps = 0;
  double decode_GBps = 0;
};

struct ProbeProfile {
  int size = 0;  // ranks the figures are for
  std::vector<TransportFigures> transports;
  double reduce_GBps = 0;  // local sum throughput (gamma = 1/reduce), 1e9 B/s of input
  std::vector<CodecFigures> codecs;  // every codec family's throughputs (empty: none measured)
  double probe_ms = 0;     // wall time the probe took (0 when loaded from cache)
  std::string source;      // "measured", "cache:<path>", "defaults"

  // nullptr when `name` was not probed.
  const TransportFigures* find(const std::string& name) const;
  const CodecFigures* find_codec(const std::string& codec) const;

  // Line-oriented "key value" text; parse() accepts exactly what to_text() writes (and rejects
  // anything else with a CONFIG error naming the line), round-tripping doubles exactly.
  std::string to_text() const;
  static Status parse(const std::string& text, ProbeProfile* out);

  // {"size":4,"source":"measured","probe_ms":..,"reduce_GBps":..,
  //  "probe":{"tcp":{"alpha_us":..,"bandwidth_GBps":..},...}}
  std::string to_json() const;

  // Nominal figures for when the probe is off (TIDEGATE_PROBE=off): chosen so that the plan
  // reproduces the fixed size rule (TIDEGATE_ALLREDUCE_RD_MAX_BYTES / _RING_MIN_BYTES).
  static ProbeProfile defaults(int size, const std::vector<std::string>& transports);
};

}  // namespace tidegate
