// Ring allgather(v) as a building block: allgather, allgatherv and the second half of ring
// allreduce all run this pass with different layouts.
#pragma once

#include <memory>

#include "base/wire_header.h"
#include "collectives/ring_layout.h"
#include "collectives/task.h"

namespace tidegate {

struct AllgatherRingPlan {
  // This rank's block. It may already sit in `output` at its offset (ring allreduce, in-place
  // allgather); otherwise it is copied there.
  const void* own_input = nullptr;
  void* output = nullptr;  // the whole result, block b at layout.block_offset[b]
  tidegate_dtype_t dtype = TIDEGATE_FLOAT32;
  RingLayout layout;
  uint64_t chunk_base = 0;  // first chunk index of this pass's messages
};

// The task for one pass. `op` is the wire identity of the enclosing collective.
std::unique_ptr<CollectiveTask> make_allgather_ring_task(const TaskContext& context,
                                                         const WireHeader& op,
                                                         const AllgatherRingPlan& plan);

}  // namespace tidegate
