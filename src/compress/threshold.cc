#include "compress/threshold.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/magnitude_scan.h"
#include "compress/payload.h"
#include "compress/sparse_payload.h"
#include "compress/sparse_sum.h"

namespace tidegate {
namespace {

// Index layout: collects the kept elements (few: this layout wins only below about n / 20 of
// them), skipping blocks with nothing to keep. False at the first non-finite element, *bad set.
bool gather(const float* x, int64_t n, uint32_t threshold, std::vector<int64_t>* indices,
            std::vector<float>* values, int64_t* bad) {
  for (int64_t i = 0; i < n; i += kScanBlock) {
    const int64_t end = std::min(n, i + kScanBlock);
    if (end - i == kScanBlock && !block_has_magnitude_at_least(x + i, threshold)) continue;
    for (int64_t j = i; j < end; ++j) {
      const uint32_t m = magnitude_bits(x[j]);
      if (m < threshold) continue;
      if (m >= kNonFiniteMagnitude) {
        *bad = j;
        return false;
      }
      indices->push_back(j);
      values->push_back(x[j]);
    }
  }
  return true;
}

// Bitmap layout, written in place in one pass. False if a non-finite element was met.
bool fill_bitmap(const float* x, int64_t n, uint32_t threshold, uint8_t* bitmap, uint8_t* values) {
  std::memset(bitmap, 0, static_cast<size_t>((n + 7) / 8));
  uint32_t non_finite = 0;
  size_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t m = magnitude_bits(x[i]);
    if (m < threshold) continue;
    non_finite |= m >= kNonFiniteMagnitude ? 1u : 0u;
    bitmap[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    std::memcpy(values + offset, x + i, sizeof(float));
    offset += sizeof(float);
  }
  return non_finite == 0;
}

// Dense layout: the tensor with the elements below the threshold zeroed, branch-free.
bool fill_dense(const float* x, int64_t n, uint32_t threshold, uint8_t* out) {
  uint32_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    const uint32_t m = bits & 0x7fffffffu;
    non_finite |= m >= kNonFiniteMagnitude ? 1u : 0u;
    bits = m >= threshold ? bits : 0u;
    std::memcpy(out + static_cast<size_t>(i) * sizeof(float), &bits, sizeof bits);
  }
  return non_finite == 0;
}

}  // namespace

Status ThresholdCodec::create(const ThresholdConfig& config, std::unique_ptr<Codec>* codec) {
  TG_CHECK_ARG(std::isfinite(config.value) && config.value >= 0,
               "threshold: value must be finite and >= 0, got " + std::to_string(config.value));
  codec->reset(new ThresholdCodec(config));
  return Status::ok();
}

std::string ThresholdCodec::spec() const {
  char buffer[32];
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, config_.value);  // shortest round trip
  return "threshold:value=" + std::string(buffer, result.ptr);
}

size_t ThresholdCodec::max_payload_bytes(const TensorView& like) const {
  if (like.count < 0 || like.count > kMaxSparseCount) return kSparsePrefixBytes;
  return sparse_payload_bound(like.count, like.count);
}

Status ThresholdCodec::encode(const TensorView& input,
                              const EncodeContext& /*context: no randomness*/, uint8_t* out,
                              size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kThreshold, input, "input"));
  const size_t bound = max_payload_bytes(input);
  TG_CHECK_ARG(capacity >= bound, "threshold codec: output capacity " + std::to_string(capacity) +
                                      " is below max_payload_bytes " + std::to_string(bound));
  const int64_t n = input.count;
  std::vector<float> converted(input.dtype == TIDEGATE_FLOAT32 ? 0 : static_cast<size_t>(n));
  const float* x = n > 0 ? floats_at(input, 0, n, converted.data()) : nullptr;
  const uint32_t threshold = threshold_bits(config_.value);
  // Counted first (non-finite elements pass any threshold, so they are counted too) so that
  // the layout, and with it every offset, is known before a byte is written.
  const int64_t kept = count_magnitude_at_least(x, n, threshold);
  const SparseLayout layout = choose_sparse_layout(n, kept);
  int64_t bad = -1;
  if (layout == SparseLayout::kIndices) {
    std::vector<int64_t> indices;
    std::vector<float> values;
    indices.reserve(static_cast<size_t>(kept));
    values.reserve(static_cast<size_t>(kept));
    if (!gather(x, n, threshold, &indices, &values, &bad)) {
      return nonfinite_input(CodecId::kThreshold, bad, element_value(input, bad));
    }
    return write_sparse_payload(CodecId::kThreshold, input.dtype, 0, n, indices.data(),
                                values.data(), kept, out, capacity, written);
  }
  PayloadWriter writer(out, capacity);
  write_sparse_prefix(&writer, CodecId::kThreshold, input.dtype, 0, n, kept, layout);
  uint8_t* body = writer.claim(sparse_body_bytes(n, kept, layout));
  TG_RETURN_IF_ERROR(writer.status());
  const bool finite = layout == SparseLayout::kBitmap
                          ? fill_bitmap(x, n, threshold, body, body + (n + 7) / 8)
                          : fill_dense(x, n, threshold, body);
  if (!finite) {
    bad = first_nonfinite(x, n);
    return nonfinite_input(CodecId::kThreshold, bad, element_value(input, bad));
  }
  *written = writer.size();
  return Status::ok();
}

Status ThresholdCodec::decode(const uint8_t* payload, size_t bytes,
                              const TensorView& output) const {
  return decode_sparse_payload(CodecId::kThreshold, 0, payload, bytes, output,
                               SparseDecode::kOverwrite);
}

Status ThresholdCodec::decode_add(const uint8_t* payload, size_t bytes,
                                  const TensorView& output) const {
  return decode_sparse_payload(CodecId::kThreshold, 0, payload, bytes, output, SparseDecode::kAdd);
}

Status ThresholdCodec::decode_sum(const PayloadSpan* payloads, size_t n, const TensorView& output,
                                  float divisor, size_t* failed) const {
  return sum_sparse_payloads(CodecId::kThreshold, 0, payloads, n, output, divisor, failed);
}

Status ThresholdCodec::decode_subtract(const uint8_t* payload, size_t bytes,
                                       const TensorView& residual) const {
  return decode_sparse_payload(CodecId::kThreshold, 0, payload, bytes, residual,
                               SparseDecode::kSubtract);
}

Status make_threshold_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  double value = 0;
  TG_RETURN_IF_ERROR(params.get_double("value", 0.01, 0, 3.4e38, &value));
  return ThresholdCodec::create({static_cast<float>(value)}, codec);
}

}  // namespace tidegate
