// The codec plan: how a compressed allreduce with codec "auto" runs, for one allow-list (the
// lossy codecs the user accepts). Per size range of the dense plan's grid it ranks dense (the
// dense plan's own choice at that size) against every allowed codec on every compressed
// algorithm that runs it and every transport that takes host memory, by the cost model:
//   - wire: the algorithm's formula with the codec's payload ratio at that size (the payload's
//     exact bound over the dense bytes: the worst case for the sparsifiers, every rank's
//     selection disjoint from the others');
//   - compute: the codec's encode and decode throughputs from the probe (codec_probe.h), the
//     slowest rank's;
//   - the identity check every compressed op starts with.
// A codec must beat dense by the plan's tie margin (5%) plus one identity check's latency (the
// phase and set-up a compressed op adds, which the formulas miss) to rank above it; dense is always
// in the ranked list, so re-planning can fall back to it (planner.h). `auto` never ranks a codec
// outside the allow-list; TIDEGATE_TUNE rules with codec=SPEC force a codec (or dense, "none")
// in their size range; without a probe (TIDEGATE_PROBE=off) only those rules compress. Built
// identically on every rank from identical inputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithm_table.h"
#include "compress/codec.h"
#include "select/plan.h"

namespace tidegate {

struct CodecChoice {
  std::shared_ptr<const Codec> codec;       // nullptr: dense (the dense plan decides the rest)
  const AlgorithmRow* algorithm = nullptr;  // a compressed row; nullptr for dense
  int transport_index = 0;
  std::string transport;
  double predicted_us = 0;  // at the entry's representative size

  bool dense() const { return codec == nullptr; }
  // "dense", or "tcp/sra+qsgd:bits=4,bucket=512".
  std::string name() const;
};

struct CodecPlanEntry {
  int64_t min_bytes = 0;
  int64_t max_bytes = INT64_MAX;    // inclusive
  std::vector<CodecChoice> ranked;  // best first; dense always present
  bool tuned = false;               // forced by a TIDEGATE_TUNE codec rule
};

class CodecPlan {
 public:
  // `allowed`: the allow-list (may be empty: then every entry is dense). CONFIG error when a
  // TUNE codec rule names a codec the allow-list does not hold.
  static Status build(const PlanInputs& inputs, const Plan& dense,
                      std::vector<std::shared_ptr<const Codec>> allowed, CodecPlan* plan);

  const CodecPlanEntry* find(int64_t bytes) const;
  const std::vector<CodecPlanEntry>& entries() const { return entries_; }
  const std::vector<std::shared_ptr<const Codec>>& allowed() const { return allowed_; }

  // Predicted microseconds of `choice` for an allreduce of `bytes` (host memory); -1 when
  // it cannot be priced.
  double cost(const CodecChoice& choice, int64_t bytes) const;
  // The same for a compressed choice, from the inputs alone.
  static double compressed_cost(const PlanInputs& inputs, const CodecChoice& choice, int64_t bytes);

  // Table: bytes, choice, predicted_us, runner-up; JSON: array of entries like Plan's with
  // "codec" in every choice ("none" for dense).
  std::string to_table() const;
  std::string to_json() const;

 private:
  PlanInputs inputs_;
  const Plan* dense_ = nullptr;
  std::vector<std::shared_ptr<const Codec>> allowed_;
  std::vector<CodecPlanEntry> entries_;
};

// The host transport a compressed allreduce of `codec` with `algorithm` runs on for `bytes`:
// the first in table order (tcp, tidegate's own, first) whose predicted time is within
// kCompressedTransportTie of the cheapest, among the first and the transports whose bandwidth
// is clearly another link's (kSameLinkBandwidth); -1 when none can be priced. Why a wider tie
// than the dense plan's 5%, even between links clearly apart: a compressed op is mostly
// computation, beside which a transport's own CPU use counts and is not modelled: MPI's and
// UCX's polling progress took 113-133 ms where tcp took 87-98 ms for the same 64 MiB
// sra+onebit and summable+signsgd ops (4 ranks on 2 cores, 1 Gbit). A transport that is
// clearly faster (InfiniBand against TCP) still wins.
inline constexpr double kCompressedTransportTie = 1.15;
// Before the time rule: a transport whose probed bandwidth is within this factor of the first
// transport's is taken for the same link measured twice, and not priced against it. The time
// rule alone let probe noise through: in one run of 2026-12-07 tcp measured 0.099 and mpi 0.119
// GB/s on the same emulated 1 Gbit link, which put fp16, bf16, qsgd and signsgd (whose times
// follow the wire more than onebit's or top-k's) on mpi at 1.3-1.6x their time on tcp.
inline constexpr double kSameLinkBandwidth = 1.3;
int compressed_transport(const PlanInputs& inputs, const std::shared_ptr<const Codec>& codec,
                         const AlgorithmRow* algorithm, int64_t bytes);

// The allow-list's canonical text ("fp16,qsgd:bits=4,bucket=512"): the key of its codec plan.
std::string allow_list_text(const std::vector<std::shared_ptr<const Codec>>& allowed);

}  // namespace tidegate
