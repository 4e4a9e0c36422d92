// Top-k sparsification: keep the k elements of largest magnitude, send their indices and exact
// values (sparse_payload.h), decode by scatter. Spec: "topk:ratio=0.01", "topk:k=1000", with
// ",mode=approx" for the sampled-threshold variant (DGC). Canonical spec:
// "topk:ratio=<r>,mode=exact|approx" or "topk:k=<k>,mode=exact|approx".
//
//  - k = round(ratio * n), at least 1 when ratio > 0 (so error feedback eventually sends every
//    element of a small tensor), or the fixed k, never more than n.
//  - Ties are broken by the lower index, so the selection is a pure function of the tensor:
//    deterministic() is true and the seed is not used.
//  - mode=exact keeps exactly min(k, n) elements. mode=approx keeps the exact top k' with
//    ceil(0.8 k) <= k' <= k, and reads the tensor a second time only when fewer than 0.8 k pass
//    the sampled threshold, where exact mode does so below k (topk_select.h explains both).
//  - k >= n sends the tensor dense; k = 0 sends no element (but still checks for NaN/Inf).
//  - Host tensors of any floating dtype (computed in float32, codec.h); NaN or Inf input is
//    INVALID_ARGUMENT naming the first bad element (codec.h's non-finite policy).
//  - EncodeContext::threads splits the collecting pass; the payload does not depend on it.
//  - The payload's flag bit kTopKApproxFlag records the mode (informational).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compress/codec.h"
#include "compress/topk_select.h"

namespace tidegate {

inline constexpr uint8_t kTopKApproxFlag = 0x04;

struct TopKConfig {
  double ratio = 0.01;  // used when k < 0
  int64_t k = -1;       // a fixed k when >= 0
  TopKMode mode = TopKMode::kExact;
};

class TopKCodec final : public Codec {
 public:
  // INVALID_ARGUMENT unless 0 <= ratio <= 1 (finite) or k >= 0.
  static Status create(const TopKConfig& config, std::unique_ptr<Codec>* codec);

  CodecId id() const override { return CodecId::kTopK; }
  std::string spec() const override;
  size_t max_payload_bytes(const TensorView& like) const override;
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_sum(const PayloadSpan* payloads, size_t n, const TensorView& output, float divisor,
                    size_t* failed) const override;
  bool decodes_sparse() const override { return true; }
  Status decode_subtract(const uint8_t* payload, size_t bytes,
                         const TensorView& residual) const override;
  bool deterministic() const override { return true; }
  bool wants_error_feedback() const override { return true; }  // biased: drops all but k

  // encode() reusing a threshold between steps, as Ok-Topk does (Li & Hoefler 2022): when
  // *threshold is not 0 (magnitude bits a little below the k-th largest magnitude of this
  // tensor's previous step), the selection starts from it instead of from a fresh sample, so it
  // is one pass over the tensor; then *threshold becomes the same for this step. In exact mode
  // the payload is exactly encode()'s (the selection stays exact, falling back when too few
  // pass), so reuse changes the time only, never a byte.
  Status encode_reusing_threshold(const TensorView& input, uint32_t* threshold, uint8_t* out,
                                  size_t capacity, size_t* written) const;
  // How many steps a tensor's threshold serves before a fresh sample replaces it (Ok-Topk
  // recomputes it every few steps): the compressed collectives forget it after this many, and
  // the codec probe prices top-k's encode as one fresh selection and the rest reusing it.
  static constexpr int kReuseSteps = 8;

  // encode_reusing_threshold() fused with error feedback's compensation, for a float32 tensor
  // of n elements whose *threshold is set and 0 < k < n (encodes_sum_reusing_threshold()):
  // selects from s = x + r (r may be null: x + 0.0), writing s into sum[0, n) as it reads x and
  // r once (topk_select.h, select_top_k_above_sum), then subtracts what the payload holds from
  // sum, which is then the next residual, bit for bit what compensating, encoding and
  // decode_subtract() give one after another. When s holds a NaN or infinity, *nonfinite is the
  // first one's index, nothing is written to out and sum is not a residual; else -1.
  bool encodes_sum_reusing_threshold(int64_t n, uint32_t threshold) const;
  Status encode_sum_reusing_threshold(const float* x, const float* r, float* sum, int64_t n,
                                      uint32_t* threshold, uint8_t* out, size_t capacity,
                                      size_t* written, int64_t* nonfinite) const;

  // The number of elements kept for a tensor of `count` elements (an upper bound in approx mode).
  int64_t k_for(int64_t count) const;
  const TopKConfig& config() const { return config_; }

 private:
  explicit TopKCodec(const TopKConfig& config) : config_(config) {}
  // Writes the selection's payload (float32 values) and sets *threshold for the next step.
  Status write_and_lower_threshold(const TopKSelection& selection, int64_t n, uint32_t* threshold,
                                   uint8_t* out, size_t capacity, size_t* written) const;
  TopKConfig config_;
};

// k = round(ratio * count), at least 1 when ratio > 0 and count > 0, at most count. Shared with
// random-k so both codecs keep the same number of elements for the same ratio.
int64_t k_from_ratio(double ratio, int64_t count);

// Shortest decimal that reads back as the same double ("0.01"), for canonical spec strings.
std::string format_spec_double(double value);

}  // namespace tidegate
