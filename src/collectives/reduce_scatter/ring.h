// Ring reduce-scatter as a building block: used on its own (reduce_scatter) and as the first
// half of ring allreduce, which lets it keep partial sums in the allreduce's output buffer.
#pragma once

#include <memory>

#include "base/wire_header.h"
#include "collectives/ring_layout.h"
#include "collectives/task.h"

namespace tidegate {

struct ReduceScatterRingPlan {
  const void* input = nullptr;  // this rank's whole contribution (layout's total count)
  void* own_output = nullptr;   // receives this rank's fully reduced block
  // Where partial sums of passing blocks live: a buffer of the whole count, each block at its
  // own offset (ring allreduce passes its output). nullptr: the task keeps a private scratch
  // of two blocks and reuses it as sends finish.
  void* partials = nullptr;
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  tidegate_reduce_op_t op = TIDEGATE_SUM;
  RingLayout layout;
  uint64_t chunk_base = 0;  // first chunk index of this pass's messages
};

// The task for one pass. `op` is the wire identity of the enclosing collective.
std::unique_ptr<CollectiveTask> make_reduce_scatter_ring_task(const TaskContext& context,
                                                              const WireHeader& op,
                                                              const ReduceScatterRingPlan& plan);

// Messages one reduce-scatter pass sends to its right neighbour (chunk indices it uses).
inline uint64_t reduce_scatter_ring_messages(const RingLayout& layout) {
  return static_cast<uint64_t>(layout.size() - 1) * static_cast<uint64_t>(layout.segments);
}

}  // namespace tidegate
