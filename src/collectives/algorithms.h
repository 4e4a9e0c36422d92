// Every dense algorithm's entry point, one per src/collectives/<collective>/<algorithm>.cc.
// Each checks the arguments it can check locally (INVALID_ARGUMENT), fixes the wire identity
// of the op and builds its task; cross-rank agreement is checked on the wire.
// make_task.cc maps (collective, algorithm name) to these.
#pragma once

#include <memory>
#include <vector>

#include "collectives/collective_args.h"
#include "collectives/task.h"
#include "core/status.h"

namespace tidegate {

using AlgorithmFactory = Status (*)(const TaskContext& context, const CollectiveArgs& args,
                                    std::unique_ptr<CollectiveTask>* task);

// allreduce/
Status make_allreduce_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task);
Status make_allreduce_recursive_doubling(const TaskContext& context, const CollectiveArgs& args,
                                         std::unique_ptr<CollectiveTask>* task);
Status make_allreduce_rabenseifner(const TaskContext& context, const CollectiveArgs& args,
                                   std::unique_ptr<CollectiveTask>* task);
// The transport's own collective (Transport::post_native); UNSUPPORTED, naming the transport,
// dtype and op, where the transport does not offer it. Shared task: native_task.h.
Status make_allreduce_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task);
// reduce_scatter/
Status make_reduce_scatter_ring(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task);
Status make_reduce_scatter_native(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task);
// allgather/
Status make_allgather_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task);
Status make_allgather_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task);
Status make_allgatherv_ring(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task);
// broadcast/
Status make_broadcast_binomial(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);
// barrier/
Status make_barrier_dissemination(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task);
// barrier/dissemination.cc: the op's header checked on every rank (header-only rounds), run
// before ops whose own messages would not meet a differing rank's.
Status make_identity_check_task(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task);
// alltoallv/
Status make_alltoallv_pairwise(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);

// Names of the algorithms `kind` has, in table order (for TIDEGATE_ALGO, tools and tests).
std::vector<const char*> algorithm_names(OpKind kind);

// Checks shared by the reducing collectives: valid dtype and op, equal input/output dtype.
Status validate_reduction_args(const CollectiveArgs& args);

}  // namespace tidegate
