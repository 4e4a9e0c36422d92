#include "select/size_rule.h"

namespace tidegate {

namespace {

// Small messages are latency-bound: recursive doubling needs log2(P) messages. Medium ones pay
// both: Rabenseifner moves the ring's bytes in 2 log2(P) messages. Large ones are
// bandwidth-bound, where the ring's neighbour-only, segment-pipelined traffic wins.
const char* allreduce_by_size(const Config& config, int64_t bytes) {
  if (bytes <= config.recursive_doubling_max_bytes()) return "recursive_doubling";
  if (bytes < config.ring_min_bytes()) return "rabenseifner";
  return "ring";
}

const char* rule_name(const Config& config, const CollectiveArgs& args) {
  switch (args.kind) {
    case OpKind::kAllreduce:
      return allreduce_by_size(config, static_cast<int64_t>(args.input.bytes()));
    case OpKind::kReduceScatter:
    case OpKind::kAllgather:
    case OpKind::kAllgatherv:
      return "ring";
    case OpKind::kBroadcast:
      return "binomial";
    case OpKind::kBarrier:
      return "dissemination";
    case OpKind::kAlltoallv:
      return "pairwise";
    case OpKind::kInternal:
      break;
  }
  return "";
}

}  // namespace

const AlgorithmRow* size_rule_algorithm(const Config& config, const CollectiveArgs& args) {
  return find_algorithm(args.kind, rule_name(config, args));
}

Status fixed_algorithm(const Config& config, const CollectiveArgs& args, const AlgorithmRow** row) {
  if (args.compression.enabled()) return compressed_algorithm(args.compression, row);
  const std::string forced = config.forced_algorithm(op_kind_name(args.kind));
  if (forced.empty()) {
    *row = size_rule_algorithm(config, args);
    TG_CHECK_ARG(*row != nullptr, std::string(op_kind_name(args.kind)) + " has no algorithm");
    return Status::ok();
  }
  *row = find_algorithm(args.kind, forced);
  if (*row != nullptr) return Status::ok();
  const std::string collective = op_kind_name(args.kind);
  return config_error("TIDEGATE_ALGO asks for " + collective + "=" + forced + ", but " +
                      collective +
                      " has no such algorithm; valid names: " + algorithm_names_text(args.kind));
}

Status make_collective_task(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(context.config != nullptr, "collective task needs a config");
  const AlgorithmRow* row = nullptr;
  TG_RETURN_IF_ERROR(fixed_algorithm(*context.config, args, &row));
  return make_algorithm_task(context, args, *row, task);
}

}  // namespace tidegate
