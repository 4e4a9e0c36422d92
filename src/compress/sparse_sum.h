// The sum of several sparse payloads (top-k, threshold) of one tensor in one pass over the
// output: Codec::decode_sum for the sparse codecs.
//
// Decoding P payloads of a large tensor one after another (zero the output, decode_add each,
// divide for AVG) passes over the output P + 2 times, and each decode_add touches k cache lines
// scattered over all of it. Here the output is cut into blocks that stay in cache: each block is
// zeroed, gets every payload's entries that fall into it (payload by payload, in the given
// order: indices are ascending, so each payload's cursor only moves forward) and is divided
// while it is still there. Each element sees the same additions in the same order as the
// one-after-another way, so the bits are the same; the output is written once, sequentially.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "base/types.h"
#include "compress/codec.h"

namespace tidegate {

// Codec::decode_sum's contract for payloads of `codec` (whose flag bits are
// allowed_codec_flags): every payload is parsed (checked completely) before the output is
// written; a PROTOCOL error of payload i sets *failed = i.
Status sum_sparse_payloads(CodecId codec, uint8_t allowed_codec_flags, const PayloadSpan* payloads,
                           size_t n, const TensorView& output, float divisor, size_t* failed);

}  // namespace tidegate
