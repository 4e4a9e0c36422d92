// What one posted collective asks for, after the C edge has validated the caller's arguments
// locally (null pointers, counts, dtypes). Cross-rank agreement is checked on the wire.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/types.h"

namespace tidegate {

struct CollectiveArgs {
  OpKind kind = OpKind::kAllreduce;
  uint64_t op_seq = 0;  // assigned by the communicator in posting order
  TensorView input;     // allreduce, reduce_scatter, allgather(v), alltoallv
  TensorView output;    // ditto; for broadcast the (in-place) tensor
  tidegate_reduce_op_t reduce_op = TIDEGATE_SUM;
  int root = 0;                      // broadcast
  std::vector<int64_t> counts;       // allgatherv: per-rank counts
  std::vector<int64_t> send_counts;  // alltoallv
  std::vector<int64_t> send_offsets;
  std::vector<int64_t> recv_counts;
  std::vector<int64_t> recv_offsets;

  // Internal, never set by the C API: a forced (transport, algorithm) for this one op, used by
  // tidegate-bench to time every choice side by side ("" = the plan decides).
  std::string force_transport;
  std::string force_algorithm;
  // Internal: the engine's own re-planning agreement (an allreduce of the planner's
  // measured/predicted statistics; the engine supplies the buffers when it starts the op).
  bool replan_round = false;
};

}  // namespace tidegate
