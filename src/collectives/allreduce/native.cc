// Native allreduce: the transport's own (MPI_Iallreduce, ncclAllReduce), offered beside
// tidegate's ring/recursive doubling/Rabenseifner. Identical results on every rank rest on the
// transport: Open MPI's allreduce algorithms reduce each element along one fixed order and
// distribute the result (checked by the mpirun tests); AVG is finalised by the transport.
#include "collectives/algorithms.h"
#include "collectives/native_task.h"

namespace tidegate {

Status make_allreduce_native(const TaskContext& context, const CollectiveArgs& args,
                             std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  TG_CHECK_ARG(args.output.count == args.input.count,
               "allreduce: input and output must have the same count");
  TG_RETURN_IF_ERROR(check_native_supported(context, NativeCollective::kAllreduce, args));
  // input == output is passed through: the transport turns it into an in-place call.
  *task = make_native_task(context, args,
                           native_args(NativeCollective::kAllreduce, args, args.input.count));
  return Status::ok();
}

// The bandwidth-optimal allreduce moves 2 (P-1)/P of the vector per rank.
double allreduce_native_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::native_collective(t, n, 2 * cost::spread(p));
}

}  // namespace tidegate
