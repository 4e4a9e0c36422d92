// The payload format shared by the index-sending sparsifiers (top-k, threshold), and the
// scatter that decodes it. After the common PayloadHeader (payload.h):
//
//   k           i64   number of kept elements, 0 <= k <= count
//   index_bits  u8    sparse_index_bits(count): the fitted index width, checked by the decoder
//   then, by the layout in the low two bits of PayloadHeader::flags:
//   kIndices    k indices, strictly ascending, packed LSB-first in index_bits bits each and
//               padded to a byte; then k float32 values in the same order
//   kBitmap     ceil(count / 8) bytes, bit i (LSB-first) set when element i is kept, k bits
//               set and none past count; then k float32 values in index order
//   kDense      count float32 values, the elements that were not kept being 0
//
// The encoder picks whichever layout is smallest for (count, k), so a dense-ish selection never
// costs more than the dense tensor, and indices are as narrow as the tensor allows: 20 bits at
// 1 Mi elements, 26 at 64 Mi, 33 past 2^32, so tensors beyond 2^31 elements need no special case.
// All three decode to the same tensor. Flag bits above the layout belong to the codec (top-k
// marks its approximate mode there) and must be declared to the decoder.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "base/types.h"
#include "compress/codec.h"

namespace tidegate {

class PayloadWriter;

enum class SparseLayout : uint8_t { kIndices = 0, kBitmap = 1, kDense = 2 };
inline constexpr uint8_t kSparseLayoutMask = 0x03;

// PayloadHeader + k + index_bits.
inline constexpr size_t kSparsePrefixBytes = 16 + 8 + 1;

// Tensors up to 2^56 elements: every size computed below then fits in 64 bits without checks.
inline constexpr int64_t kMaxSparseCount = int64_t{1} << 56;

// Bits per index for a tensor of `count` elements: bits_for(count - 1), at least 1.
unsigned sparse_index_bits(int64_t count);

// Bytes of the body (after the prefix) for k kept elements of count in a given layout.
size_t sparse_body_bytes(int64_t count, int64_t k, SparseLayout layout);

// The smallest layout for (count, k); ties go to kIndices, then kBitmap.
SparseLayout choose_sparse_layout(int64_t count, int64_t k);

// Exact bound of a payload holding at most max_k of count elements (the body sizes only grow
// with k, so the bound is the chosen layout's size at max_k).
size_t sparse_payload_bound(int64_t count, int64_t max_k);

// Writes a payload of the kept elements: indices strictly ascending in [0, count), values[i]
// the (finite) value at indices[i]. dtype is the input's, recorded in the header for
// information (values are float32 whatever it is); codec_flags go into the flag bits above the
// layout. INTERNAL error if the entries break those rules or capacity is short (encoder bugs).
Status write_sparse_payload(CodecId codec, tidegate_dtype_t dtype, uint8_t codec_flags,
                            int64_t count, const int64_t* indices, const float* values, int64_t k,
                            uint8_t* out, size_t capacity, size_t* written);

// Writes PayloadHeader, k and index_bits for a payload of the given layout, for encoders that
// fill the body themselves (threshold's bitmap and dense layouts, written in one pass).
void write_sparse_prefix(PayloadWriter* writer, CodecId codec, tidegate_dtype_t dtype,
                         uint8_t codec_flags, int64_t count, int64_t k, SparseLayout layout);

// Writes a payload that keeps every element of x[0, count) (k = count, dense layout) straight
// from the tensor, without index arrays: the k >= n case of the sparsifiers.
Status write_dense_sparse_payload(CodecId codec, tidegate_dtype_t dtype, uint8_t codec_flags,
                                  int64_t count, const float* x, uint8_t* out, size_t capacity,
                                  size_t* written);

// What a decoded payload said about itself.
struct SparsePayloadInfo {
  int64_t k = 0;
  SparseLayout layout = SparseLayout::kIndices;
  uint8_t codec_flags = 0;
};

// A payload checked completely (parse_sparse_payload): its fields, and where its index part
// (packed indices or bitmap; nothing for the dense layout) and its k (dense: count) float32
// values lie inside the payload's bytes.
struct ParsedSparsePayload {
  int64_t count = 0;
  int64_t k = 0;
  SparseLayout layout = SparseLayout::kIndices;
  unsigned index_bits = 0;
  uint8_t codec_flags = 0;
  const uint8_t* where = nullptr;
  const uint8_t* values = nullptr;
};

// Checks everything decoding relies on - layout, k, index width, exact length, ascending
// in-range indices, finite values - for a tensor of `count` elements: PROTOCOL error naming
// the fault, or ok with *parsed filled in. allowed_codec_flags: the flag bits the codec defines.
Status parse_sparse_payload(CodecId codec, uint8_t allowed_codec_flags, const uint8_t* payload,
                            size_t bytes, int64_t count, ParsedSparsePayload* parsed);

// How a decoded payload meets the output: it replaces it (zeros outside the payload's entries),
// is added into it, or is subtracted from it. Adding and subtracting touch only the payload's
// entries (x + 0 and x - 0 are x, -0.0 included), so they cost O(k), not O(count); subtracting
// is how a sender's error feedback removes what it sent from its residual.
enum class SparseDecode { kOverwrite, kAdd, kSubtract };

// Decodes into output (host, any floating dtype; float32 only for kSubtract). The payload is
// parsed (parse_sparse_payload) before the first write to output, so a malformed payload
// (PROTOCOL error) leaves output untouched.
Status decode_sparse_payload(CodecId codec, uint8_t allowed_codec_flags, const uint8_t* payload,
                             size_t bytes, const TensorView& output, SparseDecode mode,
                             SparsePayloadInfo* info = nullptr);

// check_codec_tensor() (float_io.h: host memory, a floating dtype, data) plus the count limit.
Status check_sparse_tensor(CodecId codec, const TensorView& tensor, const char* role);

// True when a payload header's dtype byte names a floating dtype.
bool payload_dtype_ok(uint8_t dtype);

}  // namespace tidegate
