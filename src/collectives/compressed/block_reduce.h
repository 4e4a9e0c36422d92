// The pipeline behind the two block-owner compressed allreduces (CGX's scatter-reduce-allgather
// and the compressed-domain vote): the tensor is cut into P blocks (block_range: rank c owns
// block c) and each block into segments of at most TIDEGATE_SEGMENT_BYTES / 4 elements.
//
//   scatter  every rank encodes segment s of every other rank's block (input + its sender
//            residual, error feedback) and sends it to that block's owner;
//   reduce   the owner combines the P contributions to its segment in rank order;
//   gather   the owner sends the encoding of the combined segment to every rank, and every
//            rank (the owner too) decodes it into its output.
//
// How the owner combines (Combine):
//   kDecodeAndReencode  (sra.cc) decode-add the P-1 payloads and its own input (not encoded:
//                       rounded zero times) into a float32 sum in rank order, divide by P for
//                       AVG, re-encode with the owner's residual (error feedback on the sum,
//                       kept in the sum's domain);
//   kSumPayloads        (summable.cc) sum the P payloads, its own encoded too, in the codec's
//                       compressed domain (Codec::sum_payloads: signSGD's vote counts, wide
//                       enough for P voters) without decoding; the gathered payload decodes to
//                       the codec's meaning of a sum (signSGD: the majority vote).
//
// Segments pipeline the three steps: the owner reduces segment s as soon as its P-1 payloads are
// in and sends it on while later segments are still being encoded and sent, so encoding,
// transfer in both directions and decoding overlap. Every receive is posted at the start.
//
// Volume per rank, b = payload bytes per dense byte: (P-1)/P n b out and in for the scatter,
// the same for the gather (the summed payloads are log2(P+1) bits per element): the dense ring's
// 2 (P-1)/P n bytes times b.
#pragma once

#include <algorithm>
#include <memory>

#include "collectives/compressed/compressed_kit.h"

namespace tidegate {

enum class BlockCombine { kDecodeAndReencode, kSumPayloads };

// Elements per segment: TIDEGATE_SEGMENT_BYTES / 4.
inline int64_t block_segment_elements(const Config& config) {
  return std::max<int64_t>(1, config.segment_bytes() / 4);
}
// encoding_seed() parts: a sender's encoding of segment s of `owner`'s block, and the owner's
// encoding of its combined segment s (per rank: the encoding rank's seed).
inline uint64_t block_sender_part(int owner, size_t s) {
  return (uint64_t{1} << 62) | (static_cast<uint64_t>(owner) << 32) | s;
}
inline uint64_t block_owner_part(size_t s) { return (uint64_t{2} << 62) | s; }

// The task for `op` (checked by check_compressed_op) with messages of `header`.
std::unique_ptr<CollectiveTask> make_block_reduce_task(const TaskContext& context,
                                                       const CompressedOp& op,
                                                       const WireHeader& header,
                                                       BlockCombine combine, const char* name);

}  // namespace tidegate
