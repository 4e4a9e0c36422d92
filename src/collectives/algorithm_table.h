// The typed algorithm table (DESIGN.md: "Algorithms are rows of one typed table"): one row per
// (collective, algorithm) with its flags, its task factory and its cost formula. The planner
// ranks the rows by their formulas, the engine builds the chosen row's task, and the bench and
// tidegate-info print their names: adding an algorithm is adding its file and one row in
// algorithm_table.cc. Rows are looked up by name only when configuration is read
// (TIDEGATE_ALGO, TIDEGATE_TUNE); an op carries a row pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "collectives/algorithms.h"
#include "collectives/cost_terms.h"
#include "compress/codec.h"

namespace tidegate {

enum AlgorithmFlag : uint32_t {
  // The transport's own collective (Transport::post_native): a candidate only on transports
  // whose capabilities offer it, and preceded by a cross-rank identity check.
  kAlgorithmNative = 1u << 0,
  // Reduces and copies with the CPU: host memory only.
  kAlgorithmHostOnly = 1u << 1,
  // Moves codec payloads (compressed and sparse collectives); takes a codec spec.
  kAlgorithmTakesCodec = 1u << 2,
};

// Predicted microseconds of the algorithm for `bytes` (the op's size as the plan keys it) on
// `ranks` ranks with the link figures `terms`; negative when the formula cannot price it
// (e.g. a reduction whose local throughput is unknown).
using CostFormula = double (*)(const CostTerms& terms, double bytes, int64_t ranks);

// For algorithms that take a codec: whether this one can run `codec`.
using CodecFilter = bool (*)(const Codec& codec);

struct AlgorithmRow {
  OpKind collective = OpKind::kAllreduce;
  const char* name = "";  // as in TIDEGATE_ALGO, TIDEGATE_TUNE and bench output
  uint32_t flags = 0;     // AlgorithmFlag bits
  AlgorithmFactory make = nullptr;
  CostFormula cost = nullptr;
  CodecFilter takes = nullptr;  // kAlgorithmTakesCodec rows only

  bool native() const { return (flags & kAlgorithmNative) != 0; }
  bool host_only() const { return (flags & kAlgorithmHostOnly) != 0; }
  bool compressed() const { return (flags & kAlgorithmTakesCodec) != 0; }
  // Whether the row can run an op with this codec (nullptr: a dense op).
  bool runs(const Codec* codec) const {
    return codec == nullptr ? !compressed() : compressed() && takes != nullptr && takes(*codec);
  }
};

// Every row, grouped by collective, in table order (the order that breaks ties in the plan).
const std::vector<AlgorithmRow>& algorithm_table();

// The rows of one collective, in table order (dense and compressed alike; AlgorithmRow::runs
// tells which can run an op).
std::vector<const AlgorithmRow*> algorithms_for(OpKind kind);

// The compressed allreduce `codec` runs with when the caller names none: topk and threshold
// gather their payloads, randomk reduces its shared-index values, powersgd its factors, signsgd
// sums its votes, every other codec scatter-reduces-allgathers (CGX). Never nullptr.
const AlgorithmRow* default_compressed_algorithm(const Codec& codec);

// The row of a compressed allreduce: compression.algorithm when it names one (CONFIG error when
// no allreduce algorithm has that name or it takes no codec, UNSUPPORTED when it cannot run the
// codec, each naming the algorithms that can), else the codec's default.
Status compressed_algorithm(const CompressionArgs& compression, const AlgorithmRow** row);

// The row of (kind, name), or nullptr.
const AlgorithmRow* find_algorithm(OpKind kind, std::string_view name);

// Names of the rows of `kind` in table order (for TIDEGATE_ALGO messages, tools and tests).
std::vector<const char*> algorithm_names(OpKind kind);
// "ring, recursive_doubling, ..." for error messages.
std::string algorithm_names_text(OpKind kind);

// Builds `row`'s task for `args` on context.transport. UNSUPPORTED when a host-only algorithm
// is asked to run on device memory; the factory's own errors otherwise.
Status make_algorithm_task(const TaskContext& context, const CollectiveArgs& args,
                           const AlgorithmRow& row, std::unique_ptr<CollectiveTask>* task);

// The header-only identity check (barrier/dissemination.cc) that precedes an op planned off
// the first transport or onto a native collective: its row's cost prices that check.
const AlgorithmRow& identity_check_algorithm();

}  // namespace tidegate
