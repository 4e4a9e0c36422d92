// Compressed allreduce of summable payloads (Codec::payloads_summable: signSGD's majority vote,
// Bernstein et al. 2018): the owner of each block sums the P encodings of it in the compressed
// domain (vote counts of log2(P+1) bits per element), without decoding a single value per hop,
// and allgathers the sum; every rank decodes it to the codec's meaning of a sum (signSGD: the
// majority sign, 0 on a tie). The result is that meaning whatever the op: SUM and AVG of a vote
// are the same vote. Error feedback applies to the sender's encoding. Pipeline: block_reduce.h.
//
// Volume per rank: (P-1)/P n/32 bytes out for the 1-bit votes, (P-1)/P n log2(P+1)/8 bits back.
#include "collectives/algorithms.h"
#include "collectives/compressed/block_reduce.h"

namespace tidegate {

Status make_allreduce_summable(const TaskContext& context, const CollectiveArgs& args,
                               std::unique_ptr<CollectiveTask>* task) {
  CompressedOp op;
  TG_RETURN_IF_ERROR(check_compressed_op(context, args, &op));
  if (!op.codec->payloads_summable()) {
    return unsupported(
        "the summable algorithm needs a codec whose payloads sum without "
        "decoding (signsgd); " +
        op.codec->spec() + "'s do not");
  }
  *task = make_block_reduce_task(context, op, op_identity(context, args),
                                 BlockCombine::kSumPayloads, "summable");
  return Status::ok();
}

double allreduce_summable_cost_us(const CostTerms& t, double n, int64_t p) {
  const double frac = cost::spread(p);
  const double summed = t.payload_ratio * std::log2(static_cast<double>(p) + 1);
  return 2 * static_cast<double>(p - 1) * t.alpha + frac * n * (t.payload_ratio + summed) * t.beta +
         n * t.encode + n * t.decode;
}

}  // namespace tidegate
