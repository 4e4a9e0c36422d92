// Compressed allreduce of summable payloads (Codec::payloads_summable: signSGD's majority vote,
// Bernstein et al. 2018): the owner of each block sums the P encodings of it in the compressed
// domain (vote counts of log2(P+1) bits per element), without decoding a single value per hop,
// and allgathers the sum, condensed where the codec can (Codec::condense_sum: for signSGD the
// decision alone, 1 bit per element for odd P and 2 for even P); every rank decodes it to the
// codec's meaning of a sum (signSGD: the majority sign, 0 on a tie). The result is that
// meaning whatever the op: SUM and AVG of a vote are the same vote. Error feedback applies to
// the sender's encoding. Pipeline: block_reduce.h.
//
// Volume per rank, bytes out: (P-1)/P n/8 for the 1-bit votes, then (P-1)/P n b/8 for the
// gathered sums, b = 1 (odd P) or 2 (even P) bits condensed, log2(P+1) as counts.
#include <algorithm>
#include <cmath>

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
  // the gathered sum: condensed to the decision (1 bit for odd P, 2 for even; signsgd is the
  // one summable codec), never wider than the counts
  const double summed =
      t.payload_ratio * std::min(p % 2 == 0 ? 2.0 : 1.0, std::log2(static_cast<double>(p) + 1));
  return 2 * static_cast<double>(p - 1) * t.alpha + frac * n * (t.payload_ratio + summed) * t.beta +
         n * t.encode + n * t.decode;
}

}  // namespace tidegate
