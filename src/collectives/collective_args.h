// What one posted collective asks for, after the C edge has validated the caller's arguments
// locally (null pointers, counts, dtypes). Cross-rank agreement is checked on the wire.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

class Codec;

// A compressed allreduce's own arguments (codec == nullptr: a dense op).
struct CompressionArgs {
  std::shared_ptr<const Codec> codec;  // parsed at the API edge: a bad spec never gets here
  uint64_t key = 0;                    // tensor key: error feedback and codec state are per key
  bool error_feedback = false;
  std::string algorithm;  // a row of the algorithm table that takes a codec; "" = the default
  // The key's step: how many compressed ops of this key the communicator ran before this one
  // (assigned by the engine in posting order). Stochastic codecs draw from (seed, key, step), so
  // a restored checkpoint (which carries the steps) repeats the next step bit for bit.
  uint64_t step = 0;
  // Codec "auto": the plan picks, per op, dense or one of `allowed` (the lossy codecs the
  // caller accepts, in a canonical order); `codec` is then set by the engine (or left null for
  // dense) before any task is built.
  bool auto_codec = false;
  std::vector<std::shared_ptr<const Codec>> allowed;

  bool enabled() const { return codec != nullptr; }
};

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
  // Internal: the op must sum every element in one rank-tree order, whatever its position in
  // the tensor (recursive doubling or Rabenseifner, never the ring or a native collective), so
  // that a gradient session's dense results are the same bits fused, chunked or alone.
  bool rank_tree_order = false;
  // Internal: the engine's own re-planning agreement (an allreduce of the planner's
  // measured/predicted statistics; the engine supplies the buffers when it starts the op).
  bool replan_round = false;
  // Internal: the engine ran this op's identity check (a header round on the first transport)
  // before its main phase, so every rank's arguments are known to be the same; a native
  // collective then skips the transport's own header exchange (one round less).
  bool identity_checked = false;

  // Compressed allreduce (kind kAllreduce with a codec).
  CompressionArgs compression;
  // Internal: a suballreduce inside a compressed algorithm (PowerSGD's P and Q, shared-index
  // random-k's values) carries its step number here, so its messages differ from its parent's
  // and from each other's (the aux field of its header).
  int32_t sub_step = 0;

  // A local op (no message, no op_seq): work on the communicator's progress thread that must
  // happen after every op posted before it and before every op posted after it (saving or
  // loading error-feedback state). Its Status is the request's.
  std::function<Status()> local_work;
};

}  // namespace tidegate
