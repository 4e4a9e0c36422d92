// Threshold sparsification: keep every element with |x| >= value (Strom 2015; the fixed
// threshold of GRACE). Spec "threshold:value=0.01"; canonical "threshold:value=<v>".
//
// The number kept depends on the data, so the payload bound is the dense tensor's size; the
// encoder counts first and then writes whichever layout of sparse_payload.h is smallest (index
// list, bitmap or dense), so a threshold that keeps most of the tensor never costs more than
// sending it dense. Comparisons are on magnitude bits (magnitude_scan.h), so the kept set is
// exactly { i : |x_i| >= value } with no rounding question; value = 0 keeps every element.
// Deterministic; host tensors of any floating dtype (computed in float32, codec.h); NaN/Inf
// anywhere in the input is INVALID_ARGUMENT naming the first bad element (it would pass any
// threshold, or poison the residual). The default value suits gradients of magnitude ~1e-2;
// a threshold is only meaningful relative to the data, so set it per model.
#pragma once

#include <memory>
#include <string>

#include "compress/codec.h"

namespace tidegate {

struct ThresholdConfig {
  float value = 0.01f;  // finite, >= 0
};

class ThresholdCodec final : public Codec {
 public:
  // INVALID_ARGUMENT unless value is finite and >= 0.
  static Status create(const ThresholdConfig& config, std::unique_ptr<Codec>* codec);

  CodecId id() const override { return CodecId::kThreshold; }
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
  bool wants_error_feedback() const override { return true; }  // biased: drops the small values

  const ThresholdConfig& config() const { return config_; }

 private:
  explicit ThresholdCodec(const ThresholdConfig& config) : config_(config) {}
  ThresholdConfig config_;
};

}  // namespace tidegate
