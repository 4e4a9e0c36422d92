// Random-k sparsification: keep k elements chosen at random from EncodeContext::seed. Spec:
// "randomk:ratio=0.01" (or "randomk:k=1000"), with ",unbiased=1" for the scaled variant.
// Canonical: "randomk:ratio=<r>,unbiased=0|1" or "randomk:k=<k>,unbiased=0|1".
//
// Which elements: the tensor is cut into k strata of floor(n/k) or ceil(n/k) consecutive
// elements (stratum j = [floor(j n / k), floor((j+1) n / k))) and one element is drawn uniformly
// from each, by a counter-based generator of (seed, j) (seeded_random.h). Every element is kept
// with probability 1 / (its stratum's length), about k/n, exactly k are kept, they come out
// sorted with no duplicate, and the draw costs O(k) with no hash set or sort. Unlike a uniform
// k-subset, two neighbours are never kept together; for gradient sparsification with error
// feedback that only spreads the kept elements more evenly.
//
// Indices are not sent: the payload carries the 8-byte seed and the decoder regenerates the
// same indices from it, so a payload is k values plus a constant, half of what index + value
// costs. This is safe because the generator is a pure function of the seed, identical on every
// rank and platform, and any seed in an untrusted payload still yields in-range indices.
//
// unbiased=0 (default, for use with error feedback as in Stich et al. 2018) sends the values
// as they are. unbiased=1 multiplies each kept value by its stratum's length (n/k when k
// divides n), the inverse of its inclusion probability, so E[decode(encode(x))] = x.
//
// Payload, after PayloadHeader (flags: kRandomKScaledFlag, kRandomKDenseFlag):
//   k i64 | seed u64 | k float32 values in ascending index order
// k >= n sends all n values unscaled with the dense flag. NaN/Inf anywhere in the input (not
// only in the kept elements, since the rest would poison the residual) is INVALID_ARGUMENT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compress/codec.h"

namespace tidegate {

inline constexpr uint8_t kRandomKScaledFlag = 0x01;
inline constexpr uint8_t kRandomKDenseFlag = 0x02;
inline constexpr size_t kRandomKPrefixBytes = 16 + 8 + 8;

struct RandomKConfig {
  double ratio = 0.01;  // used when k < 0
  int64_t k = -1;       // a fixed k when >= 0
  bool unbiased = false;
};

// The j-th kept index (0 <= j < k < n) for a seed, and the length of its stratum.
int64_t randomk_index(uint64_t seed, int64_t j, int64_t k, int64_t n,
                      int64_t* stratum_length = nullptr);

class RandomKCodec final : public Codec {
 public:
  // INVALID_ARGUMENT unless 0 <= ratio <= 1 (finite) or k >= 0.
  static Status create(const RandomKConfig& config, std::unique_ptr<Codec>* codec);

  CodecId id() const override { return CodecId::kRandomK; }
  std::string spec() const override;
  size_t max_payload_bytes(const TensorView& like) const override;
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  bool deterministic() const override { return false; }
  // The unscaled variant is biased (it shrinks the gradient by about k/n) and relies on error
  // feedback; the unbiased one does not need it.
  bool wants_error_feedback() const override { return !config_.unbiased; }

  int64_t k_for(int64_t count) const;
  const RandomKConfig& config() const { return config_; }

 private:
  explicit RandomKCodec(const RandomKConfig& config) : config_(config) {}
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;
  RandomKConfig config_;
};

}  // namespace tidegate
