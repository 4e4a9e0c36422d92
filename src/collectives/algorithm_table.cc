// The rows of the algorithm table (algorithm_table.h). Order matters: within a collective it is
// the order that breaks ties in the plan (the simpler algorithm first).
#include "collectives/algorithm_table.h"

namespace tidegate {

namespace {
constexpr uint32_t kOwn = kAlgorithmHostOnly;  // tidegate's own algorithms reduce on the CPU
constexpr uint32_t kNative = kAlgorithmNative;
constexpr uint32_t kCompressed = kAlgorithmHostOnly | kAlgorithmTakesCodec;

bool is_sparsifier(const Codec& c) {
  return c.id() == CodecId::kTopK || c.id() == CodecId::kThreshold || c.id() == CodecId::kRandomK;
}
bool gathers(const Codec& c) { return c.id() != CodecId::kPowerSgd; }
bool sparsifier(const Codec& c) { return is_sparsifier(c); }
bool randomk(const Codec& c) { return c.id() == CodecId::kRandomK; }
bool quantiser(const Codec& c) { return !is_sparsifier(c) && c.id() != CodecId::kPowerSgd; }
bool summable(const Codec& c) { return c.payloads_summable(); }
bool powersgd(const Codec& c) { return c.id() == CodecId::kPowerSgd; }
}  // namespace

const std::vector<AlgorithmRow>& algorithm_table() {
  static const std::vector<AlgorithmRow> rows = {
      // collective, name, flags, factory, cost formula
      {OpKind::kAllreduce, "ring", kOwn, make_allreduce_ring, allreduce_ring_cost_us},
      {OpKind::kAllreduce, "recursive_doubling", kOwn, make_allreduce_recursive_doubling,
       allreduce_recursive_doubling_cost_us},
      {OpKind::kAllreduce, "rabenseifner", kOwn, make_allreduce_rabenseifner,
       allreduce_rabenseifner_cost_us},
      {OpKind::kAllreduce, "native", kNative, make_allreduce_native, allreduce_native_cost_us},
      // Compressed allreduces (compressed/): the op's codec must pass the row's filter.
      {OpKind::kAllreduce, "allgather", kCompressed, make_allreduce_payload_allgather,
       allreduce_payload_allgather_cost_us, gathers},
      {OpKind::kAllreduce, "sparse_reduce_scatter", kCompressed,
       make_allreduce_sparse_reduce_scatter, allreduce_sparse_reduce_scatter_cost_us, sparsifier},
      {OpKind::kAllreduce, "shared_randomk", kCompressed, make_allreduce_shared_randomk,
       allreduce_shared_randomk_cost_us, randomk},
      {OpKind::kAllreduce, "sra", kCompressed, make_allreduce_sra, allreduce_sra_cost_us,
       quantiser},
      {OpKind::kAllreduce, "summable", kCompressed, make_allreduce_summable,
       allreduce_summable_cost_us, summable},
      {OpKind::kAllreduce, "powersgd", kCompressed, make_allreduce_powersgd,
       allreduce_powersgd_cost_us, powersgd},
      {OpKind::kReduceScatter, "ring", kOwn, make_reduce_scatter_ring, reduce_scatter_ring_cost_us},
      {OpKind::kReduceScatter, "native", kNative, make_reduce_scatter_native,
       reduce_scatter_native_cost_us},
      {OpKind::kAllgather, "ring", kOwn, make_allgather_ring, allgather_ring_cost_us},
      {OpKind::kAllgather, "native", kNative, make_allgather_native, allgather_native_cost_us},
      {OpKind::kAllgatherv, "ring", kOwn, make_allgatherv_ring, allgatherv_ring_cost_us},
      {OpKind::kBroadcast, "binomial", kOwn, make_broadcast_binomial, broadcast_binomial_cost_us},
      {OpKind::kBarrier, "dissemination", kOwn, make_barrier_dissemination,
       barrier_dissemination_cost_us},
      {OpKind::kAlltoallv, "pairwise", kOwn, make_alltoallv_pairwise, alltoallv_pairwise_cost_us},
  };
  return rows;
}

const AlgorithmRow& identity_check_algorithm() {
  // Not a row of the table: the planner never chooses it; the engine runs it before ops that
  // need it and the plan prices it with its formula. Header-only messages: any memory kind.
  static const AlgorithmRow row = {OpKind::kInternal, "identity_check", 0, make_identity_check,
                                   identity_check_cost_us};
  return row;
}

const AlgorithmRow* default_compressed_algorithm(const Codec& codec) {
  const char* name = "sra";
  switch (codec.id()) {
    case CodecId::kTopK:
    case CodecId::kThreshold:
      name = "allgather";
      break;
    case CodecId::kRandomK:
      name = "shared_randomk";
      break;
    case CodecId::kPowerSgd:
      name = "powersgd";
      break;
    default:
      name = codec.payloads_summable() ? "summable" : "sra";
  }
  return find_algorithm(OpKind::kAllreduce, name);
}

Status compressed_algorithm(const CompressionArgs& compression, const AlgorithmRow** row) {
  TG_CHECK_ARG(compression.enabled(), "compressed_algorithm: no codec");
  const Codec& codec = *compression.codec;
  if (compression.algorithm.empty()) {
    *row = default_compressed_algorithm(codec);
    return Status::ok();
  }
  std::string runnable;
  std::string compressed;
  for (const AlgorithmRow* r : algorithms_for(OpKind::kAllreduce)) {
    if (!r->compressed()) continue;
    compressed += (compressed.empty() ? "" : ", ") + std::string(r->name);
    if (r->runs(&codec)) runnable += (runnable.empty() ? "" : ", ") + std::string(r->name);
  }
  const AlgorithmRow* named = find_algorithm(OpKind::kAllreduce, compression.algorithm);
  if (named == nullptr || !named->compressed()) {
    return config_error("compressed allreduce algorithm '" + compression.algorithm +
                        "' does not exist; the compressed algorithms are " + compressed);
  }
  if (!named->runs(&codec)) {
    return unsupported("the " + compression.algorithm + " algorithm cannot run codec " +
                       codec.spec() + "; algorithms that can: " + runnable);
  }
  *row = named;
  return Status::ok();
}

std::vector<const AlgorithmRow*> algorithms_for(OpKind kind) {
  std::vector<const AlgorithmRow*> rows;
  for (const AlgorithmRow& row : algorithm_table()) {
    if (row.collective == kind) rows.push_back(&row);
  }
  return rows;
}

const AlgorithmRow* find_algorithm(OpKind kind, std::string_view name) {
  for (const AlgorithmRow& row : algorithm_table()) {
    if (row.collective == kind && name == row.name) return &row;
  }
  return nullptr;
}

std::vector<const char*> algorithm_names(OpKind kind) {
  std::vector<const char*> names;
  for (const AlgorithmRow* row : algorithms_for(kind)) names.push_back(row->name);
  return names;
}

std::string algorithm_names_text(OpKind kind) {
  std::string text;
  for (const char* name : algorithm_names(kind))
    text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

Status validate_reduction_args(const CollectiveArgs& args) {
  TG_CHECK_ARG(dtype_is_valid(args.input.dtype), "unknown dtype");
  TG_CHECK_ARG(reduce_op_is_valid(args.reduce_op), "unknown reduce op");
  TG_CHECK_ARG(
      args.input.dtype == args.output.dtype,
      std::string(op_kind_name(args.kind)) + ": input and output must have the same dtype");
  TG_CHECK_ARG(args.input.count >= 0 && args.output.count >= 0,
               std::string(op_kind_name(args.kind)) + ": negative count");
  return Status::ok();
}

Status make_algorithm_task(const TaskContext& context, const CollectiveArgs& args,
                           const AlgorithmRow& row, std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(context.transport != nullptr && context.config != nullptr,
               "collective task needs a transport and a config");
  const bool host =
      args.input.memory == TIDEGATE_MEMORY_HOST && args.output.memory == TIDEGATE_MEMORY_HOST;
  if (!host && row.host_only()) {
    return unsupported(std::string(op_kind_name(args.kind)) + ": the " + row.name +
                       " algorithm runs on host memory only; CUDA tensors need a transport with "
                       "native collectives (nccl)");
  }
  // (The identity check runs before any op, dense or compressed: it is no row of args.kind.)
  if (row.collective == args.kind && !row.runs(args.compression.codec.get())) {
    return unsupported(std::string(op_kind_name(args.kind)) + ": the " + row.name +
                       (row.compressed() ? " algorithm needs a codec it can run"
                                         : " algorithm is dense and cannot run a codec"));
  }
  return row.make(context, args, task);
}

}  // namespace tidegate
