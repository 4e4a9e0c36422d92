// The step before a dense allreduce of a tensor that was compressed before (codec "auto" going
// back to dense): the output takes the input and then the key's residuals (the sender's and the
// owner's; error feedback), which are zeroed, so the dense allreduce that follows in place on
// the output sends everything the compressed steps had held back: nothing of the gradient is
// lost at the switch. Local: no message.
#pragma once

#include <memory>

#include "collectives/collective_args.h"
#include "collectives/task.h"

namespace tidegate {

// args: the op (its output receives input + residuals); context.compression: the state.
Status make_flush_residual_task(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task);

}  // namespace tidegate
