// Ring allreduce = ring reduce-scatter, then ring allgather (UCC's composition), in place on
// the output: the reduce-scatter keeps its partial sums in the output at their own offsets
// and reduces each received segment straight from the receive slot into the output
// (output = received op input), so no extra pass copies the input first. The owner of each
// block finalises AVG once before the allgather sends its bytes to everybody, so every rank
// ends with the owner's bits. Bandwidth-optimal: each rank sends 2 (P-1)/P of the tensor.
#include "collectives/allgather/ring.h"

#include <vector>

#include "collectives/algorithms.h"
#include "collectives/reduce_scatter/ring.h"
#include "collectives/task_kit.h"

namespace tidegate {

Status make_allreduce_ring(const TaskContext& context, const CollectiveArgs& args,
                           std::unique_ptr<CollectiveTask>* task) {
  TG_RETURN_IF_ERROR(validate_reduction_args(args));
  TG_CHECK_ARG(args.output.count == args.input.count,
               "allreduce: input and output must have the same count");
  const WireHeader op = op_identity(context, args);
  const size_t element_size = args.input.element_size();
  const RingLayout layout = RingLayout::even(args.input.count, context.size, element_size,
                                             context.config->segment_bytes());
  char* own_block =
      args.output.byte_data() +
      layout.block_offset[static_cast<size_t>(context.rank)] * static_cast<int64_t>(element_size);

  ReduceScatterRingPlan scatter;
  scatter.input = args.input.data;
  scatter.own_output = own_block;
  scatter.partials = args.output.data;
  scatter.dtype = args.input.dtype;
  scatter.op = args.reduce_op;
  scatter.layout = layout;
  scatter.chunk_base = 0;

  AllgatherRingPlan gather;
  gather.own_input = own_block;
  gather.output = args.output.data;
  gather.dtype = args.input.dtype;
  gather.layout = layout;
  // The allgather's messages continue the numbering, so that a rank that is one phase ahead
  // or behind is caught by the chunk field rather than by a payload of the wrong meaning.
  gather.chunk_base = reduce_scatter_ring_messages(layout);

  std::vector<std::unique_ptr<CollectiveTask>> steps;
  steps.push_back(make_reduce_scatter_ring_task(context, op, scatter));
  steps.push_back(make_allgather_ring_task(context, op, gather));
  *task = std::make_unique<SequenceTask>("ring", std::move(steps));
  return Status::ok();
}

// Reduce-scatter then allgather, each P-1 neighbour steps of n/P bytes.
double allreduce_ring_cost_us(const CostTerms& t, double n, int64_t p) {
  const double scatter = cost::ring_reduce_scatter(t, n, p);
  return scatter < 0 ? -1 : scatter + cost::ring_allgather(t, n, p);
}

}  // namespace tidegate
