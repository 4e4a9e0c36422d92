// Quantised scatter-reduce-allgather (CGX's SRA, Markov et al.): the compressed allreduce of the
// quantisers (fp16, bf16, qsgd, maxmin, terngrad, onebit, efsign). Every chunk is quantised once
// by its sender; its owner decodes the P contributions and accumulates them in float32 in rank
// order (its own without quantising it), divides by P for AVG, quantises the reduced chunk once
// and allgathers it, and every rank decodes the same bytes. Error feedback applies to the
// sender's quantisation (the sender residual) and, as a second residual held by the owner, to
// the re-quantisation (DeepSpeed's 1-bit Adam keeps both). The pipeline: block_reduce.h.
//
// Volume per rank with b = payload bytes per dense byte (4-bit qsgd at bucket 512: about 1/7.9):
// 2 (P-1)/P n b, the dense ring's volume times b, in segments that overlap encode, transfer and
// decode.
#include "collectives/algorithms.h"
#include "collectives/compressed/block_reduce.h"

namespace tidegate {

Status make_allreduce_sra(const TaskContext& context, const CollectiveArgs& args,
                          std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  *task = make_block_reduce_task(context, op, op_identity(context, args),
                                 BlockCombine::kDecodeAndReencode, "sra");
  return Status::ok();
}

// Like the ring (P - 1 latencies each way), the payload instead of the tensor on the wire, and
// the codec's work: every element is encoded about twice and decoded about twice.
double allreduce_sra_cost_us(const CostTerms& t, double n, int64_t p) {
  const double frac = cost::spread(p);
  return 2 * static_cast<double>(p - 1) * t.alpha + 2 * frac * n * t.payload_ratio * t.beta +
         (1 + 1.0 / static_cast<double>(p)) * n * t.encode + 2 * n * t.decode;
}

}  // namespace tidegate
