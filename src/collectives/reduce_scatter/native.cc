// Native reduce_scatter: the transport's own (MPI_Ireduce_scatter_block, ncclReduceScatter).
//
// tidegate's reduce_scatter splits the N input elements into tidegate_block_range() blocks,
// the first N % size of them one element longer. The native interface (like
// MPI_Ireduce_scatter_block and ncclReduceScatter) knows only equal blocks of `count`, so:
//   - N divisible by size: one native reduce_scatter with count N / size;
//   - otherwise: a native allreduce of all N elements into a private buffer, then this rank's
//     block is copied out. Twice the traffic of a reduce-scatter, but still the transport's
//     own collective, and correct for every N (the uneven case is what the ring is for).
// The header carries the reduce_scatter's identity (input count N) either way, so ranks that
// disagree on N fail the header check before any data moves.
#include <algorithm>
#include <cstring>
#include <memory>

#include "collectives/algorithms.h"
#include "collectives/native_task.h"
#include "collectives/task_kit.h"

namespace tidegate {

namespace {

Status make_uneven(const TaskContext& context, const CollectiveArgs& args, int64_t offset,
                   int64_t length, std::unique_ptr<CollectiveTask>* task) {
  const size_t element_size = args.input.element_size();
  auto scratch = std::make_shared_for_overwrite<char[]>(args.input.bytes());
  NativeCollectiveArgs native = native_args(NativeCollective::kAllreduce, args, args.input.count);
  native.output = scratch.get();
  char* output = args.output.byte_data();
  auto copy_block = [scratch, output, offset, length, element_size] {
    std::memcpy(output, scratch.get() + static_cast<size_t>(offset) * element_size,
                static_cast<size_t>(length) * element_size);
  };
  *task = make_native_task(context, args, native, copy_block);
  return Status::ok();
}

}  // namespace

Status make_reduce_scatter_native(const TaskContext& context, const CollectiveArgs& args,
                                  std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  int64_t offset = 0, length = 0;
  block_range(args.input.count, context.size, context.rank, &offset, &length);
  TG_CHECK_ARG(args.output.count == length,
               "reduce_scatter: output count must equal this rank's block length "
               "(tidegate_block_range)");
  TG_RETURN_IF_ERROR(check_native_supported(context, NativeCollective::kReduceScatter, args));
  if (args.input.count % context.size != 0) {
    TG_RETURN_IF_ERROR(check_native_supported(context, NativeCollective::kAllreduce, args));
    return make_uneven(context, args, offset, length, task);
  }
  NativeCollectiveArgs native = native_args(NativeCollective::kReduceScatter, args, length);
  if (!output_overlaps_input(args)) {
    *task = make_native_task(context, args, native);
    return Status::ok();
  }
  // An output inside the input (at its start, or this rank's own block): the transports' own
  // in-place forms differ (MPI_IN_PLACE takes the first, NCCL the second), so the result goes
  // to a scratch block and is copied out, which is right for every shape and transport.
  const size_t bytes = args.output.bytes();
  auto scratch = std::make_shared_for_overwrite<char[]>(std::max<size_t>(bytes, 1));
  native.output = scratch.get();
  char* output = args.output.byte_data();
  *task = make_native_task(context, args, native,
                           [scratch, output, bytes] { std::memcpy(output, scratch.get(), bytes); });
  return Status::ok();
}

double reduce_scatter_native_cost_us(const CostTerms& t, double n, int64_t p) {
  return cost::native_collective(t, n, cost::spread(p));
}

}  // namespace tidegate
