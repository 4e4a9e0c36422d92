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

}  // namespace

const char* size_rule_algorithm(const Config& config, const CollectiveArgs& args) {
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

}  // namespace tidegate
