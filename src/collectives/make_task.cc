// From a posted collective to its task: the algorithm table of every collective, the forced
// choice of TIDEGATE_ALGO, and otherwise the selector's rule (select/size_rule.h).
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "select/size_rule.h"

namespace tidegate {

namespace {

struct AlgorithmEntry {
  const char* name;
  AlgorithmFactory make;
};

const std::vector<AlgorithmEntry>& algorithm_table(OpKind kind) {
  static const std::vector<AlgorithmEntry> allreduce = {
      {"ring", make_allreduce_ring},
      {"recursive_doubling", make_allreduce_recursive_doubling},
      {"rabenseifner", make_allreduce_rabenseifner},
      {"native", make_allreduce_native}};
  static const std::vector<AlgorithmEntry> reduce_scatter = {
      {"ring", make_reduce_scatter_ring}, {"native", make_reduce_scatter_native}};
  static const std::vector<AlgorithmEntry> allgather = {{"ring", make_allgather_ring},
                                                        {"native", make_allgather_native}};
  static const std::vector<AlgorithmEntry> allgatherv = {{"ring", make_allgatherv_ring}};
  static const std::vector<AlgorithmEntry> broadcast = {{"binomial", make_broadcast_binomial}};
  static const std::vector<AlgorithmEntry> barrier = {
      {"dissemination", make_barrier_dissemination}};
  static const std::vector<AlgorithmEntry> alltoallv = {{"pairwise", make_alltoallv_pairwise}};
  static const std::vector<AlgorithmEntry> none;
  switch (kind) {
    case OpKind::kAllreduce:
      return allreduce;
    case OpKind::kReduceScatter:
      return reduce_scatter;
    case OpKind::kAllgather:
      return allgather;
    case OpKind::kAllgatherv:
      return allgatherv;
    case OpKind::kBroadcast:
      return broadcast;
    case OpKind::kBarrier:
      return barrier;
    case OpKind::kAlltoallv:
      return alltoallv;
    case OpKind::kInternal:
      break;
  }
  return none;
}

std::string joined_names(OpKind kind) {
  std::string text;
  for (const AlgorithmEntry& entry : algorithm_table(kind)) {
    if (!text.empty()) text += ", ";
    text += entry.name;
  }
  return text;
}

}  // namespace

std::vector<const char*> algorithm_names(OpKind kind) {
  std::vector<const char*> names;
  for (const AlgorithmEntry& entry : algorithm_table(kind)) names.push_back(entry.name);
  return names;
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

std::string planned_algorithm(const TaskContext& context, const CollectiveArgs& args) {
  std::string forced = context.config->forced_algorithm(op_kind_name(args.kind));
  if (!forced.empty()) return forced;
  return size_rule_algorithm(*context.config, args);
}

Status make_collective_task(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task) {
  return make_collective_task_with(context, args, planned_algorithm(context, args), task);
}

Status make_collective_task_with(const TaskContext& context, const CollectiveArgs& args,
                                 const std::string& name, std::unique_ptr<CollectiveTask>* task) {
  TG_CHECK_ARG(context.transport != nullptr && context.config != nullptr,
               "collective task needs a transport and a config");
  const bool host = args.input.memory == TIDEGATE_MEMORY_HOST && args.output.memory == TIDEGATE_MEMORY_HOST;
  if (!host && name != "native") {
    return unsupported(std::string(op_kind_name(args.kind)) + ": the " + name +
                       " algorithm runs on host memory only; CUDA tensors need a transport with "
                       "native collectives (nccl)");
  }
  for (const AlgorithmEntry& entry : algorithm_table(args.kind)) {
    if (name == entry.name) {
      TG_RETURN_IF_ERROR(entry.make(context, args, task));
      return Status::ok();
    }
  }
  const std::string collective = op_kind_name(args.kind);
  return config_error("TIDEGATE_ALGO asks for " + collective + "=" + name + ", but " + collective +
                      " has no such algorithm; valid names: " + joined_names(args.kind));
}

}  // namespace tidegate
