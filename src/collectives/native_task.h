// The task behind every "native" algorithm (allreduce/, allgather/, reduce_scatter/native.cc):
// one collective of the transport itself (MPI_Iallreduce, ncclAllReduce, ...), posted with the
// op's WireHeader so that the transport checks the ranks' agreement before any data moves.
#pragma once

#include <functional>
#include <memory>

#include "base/transport.h"
#include "collectives/algorithms.h"
#include "collectives/task.h"

namespace tidegate {

// UNSUPPORTED, naming the transport, collective, dtype, op and memory, unless the transport
// offers `kind` for `args` (the planner checks the same; this catches a forced TIDEGATE_ALGO).
Status check_native_supported(const TaskContext& context, NativeCollective kind,
                              const CollectiveArgs& args);

// Posts `native` with the header op_identity() gives `args`; done when the transport reports
// the collective finished. `after` (may be empty) runs once then, for local work such as
// copying a block out of a scratch buffer.
std::unique_ptr<CollectiveTask> make_native_task(const TaskContext& context,
                                                 const CollectiveArgs& args,
                                                 const NativeCollectiveArgs& native,
                                                 std::function<void()> after = {});

// A native view of `args`: buffers, count, dtype, op and memory kind copied over.
NativeCollectiveArgs native_args(NativeCollective kind, const CollectiveArgs& args, int64_t count);

}  // namespace tidegate
