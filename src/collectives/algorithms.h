// Every algorithm's entry points, one pair per src/collectives/<collective>/<algorithm>.cc: the
// factory, which checks the arguments it can check locally (INVALID_ARGUMENT), fixes the wire
// identity of the op and builds its task (cross-rank agreement is checked on the wire); and
// the cost formula the planner prices it with (collectives/cost_terms.h). The rows of
// algorithm_table.cc pair them with the collective, the name and the flags.
#pragma once

#include <memory>

#include "base/status.h"
#include "collectives/collective_args.h"
#include "collectives/cost_terms.h"
#include "collectives/task.h"

namespace tidegate {

using AlgorithmFactory = Status (*)(const TaskContext& context, const CollectiveArgs& args,
                                    std::unique_ptr<CollectiveTask>* task);

// allreduce/
Status make_allreduce_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task);
double allreduce_ring_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_recursive_doubling(const TaskContext& context, const CollectiveArgs& args,
                                         std::unique_ptr<CollectiveTask>* task);
double allreduce_recursive_doubling_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_rabenseifner(const TaskContext& context, const CollectiveArgs& args,
                                   std::unique_ptr<CollectiveTask>* task);
double allreduce_rabenseifner_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// The transport's own collective (Transport::post_native); UNSUPPORTED, naming the transport,
// dtype and op, where the transport does not offer it. Shared task: native_task.h.
Status make_allreduce_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task);
double allreduce_native_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// compressed/ (allreduce with a codec)
Status make_allreduce_payload_allgather(const TaskContext& context, const CollectiveArgs& args,
                                        std::unique_ptr<CollectiveTask>* task);
double allreduce_payload_allgather_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_sparse_reduce_scatter(const TaskContext& context, const CollectiveArgs& args,
                                            std::unique_ptr<CollectiveTask>* task);
double allreduce_sparse_reduce_scatter_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_shared_randomk(const TaskContext& context, const CollectiveArgs& args,
                                     std::unique_ptr<CollectiveTask>* task);
double allreduce_shared_randomk_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_sra(const TaskContext& context, const CollectiveArgs& args,
                          std::unique_ptr<CollectiveTask>* task);
double allreduce_sra_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_summable(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);
double allreduce_summable_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allreduce_powersgd(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);
double allreduce_powersgd_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// reduce_scatter/
Status make_reduce_scatter_ring(const TaskContext& context, const CollectiveArgs& args,
                                std::unique_ptr<CollectiveTask>* task);
double reduce_scatter_ring_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_reduce_scatter_native(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task);
double reduce_scatter_native_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// allgather/
Status make_allgather_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task);
double allgather_ring_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allgather_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task);
double allgather_native_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
Status make_allgatherv_ring(const TaskContext& context, const CollectiveArgs& args,
                            std::unique_ptr<CollectiveTask>* task);
double allgatherv_ring_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// broadcast/
Status make_broadcast_binomial(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);
double broadcast_binomial_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// barrier/
Status make_barrier_dissemination(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task);
double barrier_dissemination_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// barrier/dissemination.cc: the op's header checked on every rank (header-only rounds), run
// before ops whose own messages would not meet a differing rank's.
Status make_identity_check(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task);
double identity_check_cost_us(const CostTerms& terms, double bytes, int64_t ranks);
// alltoallv/
Status make_alltoallv_pairwise(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task);
double alltoallv_pairwise_cost_us(const CostTerms& terms, double bytes, int64_t ranks);

// Checks shared by the reducing collectives: valid dtype and op, equal input/output dtype.
Status validate_reduction_args(const CollectiveArgs& args);

}  // namespace tidegate
