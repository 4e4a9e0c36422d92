// Error feedback (residual memory), applied around any codec (DESIGN.md "Codec"): what a lossy
// codec did not send this step is remembered per tensor key and added to the tensor the next
// time, so compression error accumulates into later updates instead of being lost. Biased codecs
// (signsgd, efsign, onebit, nearest rounding, top-k) need it to converge; they say so with
// Codec::wants_error_feedback().
//
// Per key, with x the input and r the stored residual:
//   compensated = x + r                (in x's dtype for f16/bf16 inputs, which rounds once)
//   payload     = codec.encode(compensated)
//   sent        = codec.decode(payload)   (into x's dtype: what a receiver of that dtype gets)
//   r           = compensated - sent
// so that sent + r == x + r_previous up to the floating-point rounding of these two sums.
// Residuals are float32 for float32/float16/bfloat16 tensors and float64 for float64 ones.
//
// Errors leave the residual of the key exactly as it was (codec.h non-finite policy): a
// non-finite input, a codec error, or a residual that would not be finite.
//
// Thread safety: calls for different keys may run concurrently. Calls for the same key must not
// overlap, and save(), load() and reset_all() must not overlap with any other call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/types.h"
#include "compress/codec.h"

namespace tidegate {

class ResidualStore {
 public:
  ResidualStore();
  ~ResidualStore();
  ResidualStore(const ResidualStore&) = delete;
  ResidualStore& operator=(const ResidualStore&) = delete;

  // Encodes input + residual[key] into out[0, capacity) (capacity >= codec.max_payload_bytes
  // (input)) and stores the new residual. The first call for a key starts from a zero residual.
  // Errors: those of encode/decode; INVALID_ARGUMENT when the key's residual has another count
  // or precision than input, or when the new residual would not be finite.
  Status encode_with_feedback(const Codec& codec, uint64_t key, const TensorView& input,
                              const EncodeContext& context, uint8_t* out, size_t capacity,
                              size_t* written);

  // Direct access to the float32 residual of `key` (a tensor of `count` elements), for the
  // compressed collectives, which fuse the error-feedback arithmetic into their own passes over
  // slices of a tensor (a chunk, a segment): the residual is kept for the whole tensor, so it
  // does not depend on how a collective cuts it. The first call for a key makes a zero
  // residual. INVALID_ARGUMENT when the key's residual has another count or is float64.
  // The pointer stays valid until the key is reset or its residual swapped
  // (swap_float_residual), or the store loaded, reset or destroyed.
  Status float_residual(uint64_t key, int64_t count, float** residual);

  // Makes *values (exactly the key's count of floats) the residual of key, and hands the old
  // residual back in *values: a collective computes the next residual into spare memory and
  // swaps it in only once the op's encoding succeeded. INVALID_ARGUMENT when the key has no
  // float32 residual of that count.
  Status swap_float_residual(uint64_t key, std::vector<float>* values);

  // Adds the residual of key into `dense` (a tensor about to be sent uncompressed, so nothing is
  // lost) and sets the residual to zero. No residual for key: nothing to do.
  Status flush(uint64_t key, const TensorView& dense);

  // Forgets the residual of one key / of every key (memory is released).
  void reset(uint64_t key);
  void reset_all();

  bool has(uint64_t key) const;
  size_t keys() const;
  // The residual of key as doubles (exact for both precisions); NOT_FOUND-like INVALID_ARGUMENT
  // when the key has none.
  Status residual(uint64_t key, std::vector<double>* values) const;

  // Serialises every residual into *out (replacing its contents) for a training checkpoint:
  //   u32 magic "TGEF" | u32 version | u64 entries | entries sorted by key:
  //   u64 key | u8 dtype (float32 or float64) | 7 zero bytes | i64 count | count values
  // little-endian. The same state always gives the same bytes.
  Status save(std::vector<uint8_t>* out) const;
  // Replaces every residual with those in a buffer written by save(). The buffer is checked
  // completely (magic, version, lengths, duplicate keys, finite values) before anything
  // changes: on error the store is unchanged (INVALID_ARGUMENT).
  Status load(const uint8_t* data, size_t bytes);

  static constexpr uint32_t kSaveMagic = 0x46454754;  // "TGEF"
  static constexpr uint32_t kSaveVersion = 1;

 private:
  struct Entry;
  struct Scratch;
  Entry* find(uint64_t key) const;
  std::unique_ptr<Scratch> take_scratch();
  void give_scratch(std::unique_ptr<Scratch> scratch);

  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;
  std::vector<std::unique_ptr<Scratch>>
      free_scratch_;  // reused between calls: no page faults per step
};

}  // namespace tidegate
