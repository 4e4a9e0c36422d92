#include "compress/topk.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/sparse_payload.h"
#include "compress/sparse_sum.h"

namespace tidegate {

int64_t k_from_ratio(double ratio, int64_t count) {
  if (count <= 0 || !(ratio > 0)) return 0;
  const double k = std::round(ratio * static_cast<double>(count));
  if (k >= static_cast<double>(count)) return count;
  return std::max<int64_t>(1, static_cast<int64_t>(k));
}

std::string format_spec_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

Status TopKCodec::create(const TopKConfig& config, std::unique_ptr<Codec>* codec) {
  if (config.k < 0) {
    TG_CHECK_ARG(std::isfinite(config.ratio) && config.ratio >= 0 && config.ratio <= 1,
                 "topk: ratio must be in [0, 1], got " + format_spec_double(config.ratio));
  }
  TG_CHECK_ARG(config.mode == TopKMode::kExact || config.mode == TopKMode::kApprox,
               "topk: unknown mode");
  codec->reset(new TopKCodec(config));
  return Status::ok();
}

std::string TopKCodec::spec() const {
  const std::string size = config_.k >= 0 ? "k=" + std::to_string(config_.k)
                                          : "ratio=" + format_spec_double(config_.ratio);
  return "topk:" + size + (config_.mode == TopKMode::kApprox ? ",mode=approx" : ",mode=exact");
}

int64_t TopKCodec::k_for(int64_t count) const {
  if (count <= 0) return 0;
  return config_.k >= 0 ? std::min(config_.k, count) : k_from_ratio(config_.ratio, count);
}

size_t TopKCodec::max_payload_bytes(const TensorView& like) const {
  if (like.count < 0 || like.count > kMaxSparseCount) return kSparsePrefixBytes;
  return sparse_payload_bound(like.count, k_for(like.count));
}

Status TopKCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                         size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kTopK, input, "input"));
  const size_t bound = max_payload_bytes(input);
  TG_CHECK_ARG(capacity >= bound, "topk codec: output capacity " + std::to_string(capacity) +
                                      " is below max_payload_bytes " + std::to_string(bound));
  const int64_t n = input.count;
  std::vector<float> converted(input.dtype == TIDEGATE_FLOAT32 ? 0 : static_cast<size_t>(n));
  const float* x = n > 0 ? floats_at(input, 0, n, converted.data()) : nullptr;
  const int64_t k = k_for(n);
  const uint8_t flags = config_.mode == TopKMode::kApprox ? kTopKApproxFlag : 0;
  if (k >= n) {
    // Everything is kept: send the tensor as it is, once checked.
    const int64_t bad = first_nonfinite(x, n);
    if (bad >= 0) return nonfinite_input(CodecId::kTopK, bad, element_value(input, bad));
    return write_dense_sparse_payload(CodecId::kTopK, input.dtype, flags, n, x, out, capacity,
                                      written);
  }
  TopKSelection selection;
  select_top_k(x, n, k, config_.mode, &selection, nullptr,
               context.threads);  // the seed is not used
  if (selection.nonfinite >= 0) {
    return nonfinite_input(CodecId::kTopK, selection.nonfinite,
                           element_value(input, selection.nonfinite));
  }
  return write_sparse_payload(CodecId::kTopK, input.dtype, flags, n, selection.indices.get(),
                              selection.values.get(), selection.size, out, capacity, written);
}

Status TopKCodec::encode_reusing_threshold(const TensorView& input, uint32_t* threshold,
                                           uint8_t* out, size_t capacity, size_t* written) const {
  const int64_t n = input.count;
  const int64_t k = k_for(n);
  if (k >= n || k == 0 || input.dtype != TIDEGATE_FLOAT32) {
    *threshold = 0;
    return encode(input, EncodeContext{}, out, capacity, written);
  }
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kTopK, input, "input"));
  TG_CHECK_ARG(capacity >= max_payload_bytes(input), "topk codec: output capacity too small");
  const float* x = static_cast<const float*>(input.data);
  TopKSelection selection;
  if (*threshold == 0) {
    select_top_k(x, n, k, config_.mode, &selection);
  } else {
    // About 1.25 k pass a threshold 0.9 below last step's k-th magnitude on similar gradients;
    // fewer makes the exact selection fall back to the full strategy (still exact).
    select_top_k_above(x, n, k, config_.mode, *threshold, k + k / 4, &selection);
  }
  if (selection.nonfinite >= 0) {
    return nonfinite_input(CodecId::kTopK, selection.nonfinite,
                           element_value(input, selection.nonfinite));
  }
  return write_and_lower_threshold(selection, n, threshold, out, capacity, written);
}

Status TopKCodec::write_and_lower_threshold(const TopKSelection& selection, int64_t n,
                                            uint32_t* threshold, uint8_t* out, size_t capacity,
                                            size_t* written) const {
  const uint8_t flags = config_.mode == TopKMode::kApprox ? kTopKApproxFlag : 0;
  TG_RETURN_IF_ERROR(write_sparse_payload(CodecId::kTopK, TIDEGATE_FLOAT32, flags, n,
                                          selection.indices.get(), selection.values.get(),
                                          selection.size, out, capacity, written));
  // The next step's threshold: 0.9 of the smallest magnitude kept now.
  float smallest = INFINITY;
  for (int64_t i = 0; i < selection.size; ++i) {
    smallest = std::min(smallest, std::fabs(selection.values[i]));
  }
  *threshold = 0;
  if (std::isfinite(smallest) && smallest > 0) {
    const float lowered = smallest * 0.9f;
    std::memcpy(threshold, &lowered, sizeof lowered);
  }
  return Status::ok();
}

bool TopKCodec::encodes_sum_reusing_threshold(int64_t n, uint32_t threshold) const {
  const int64_t k = k_for(n);
  return threshold != 0 && k > 0 && k < n;
}

Status TopKCodec::encode_sum_reusing_threshold(const float* x, const float* r, float* sum,
                                               int64_t n, uint32_t* threshold, uint8_t* out,
                                               size_t capacity, size_t* written,
                                               int64_t* nonfinite) const {
  TG_CHECK_ARG(encodes_sum_reusing_threshold(n, *threshold),
               "topk codec: encode_sum_reusing_threshold needs a threshold and 0 < k < n");
  TensorView like;
  like.count = n;
  like.dtype = TIDEGATE_FLOAT32;
  TG_CHECK_ARG(capacity >= max_payload_bytes(like), "topk codec: output capacity too small");
  const int64_t k = k_for(n);
  TopKSelection selection;
  select_top_k_above_sum(x, r, sum, n, k, config_.mode, *threshold, k + k / 4, &selection);
  *nonfinite = selection.nonfinite;
  if (selection.nonfinite >= 0) return Status::ok();
  TG_RETURN_IF_ERROR(write_and_lower_threshold(selection, n, threshold, out, capacity, written));
  // What was sent leaves the sum (x - x is +0.0, as decode_subtract() of the payload gives).
  for (int64_t i = 0; i < selection.size; ++i) {
    float& kept = sum[selection.indices[i]];
    kept = kept - selection.values[i];
  }
  return Status::ok();
}

Status TopKCodec::decode(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_sparse_payload(CodecId::kTopK, kTopKApproxFlag, payload, bytes, output,
                               SparseDecode::kOverwrite);
}

Status TopKCodec::decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_sparse_payload(CodecId::kTopK, kTopKApproxFlag, payload, bytes, output,
                               SparseDecode::kAdd);
}

Status TopKCodec::decode_sum(const PayloadSpan* payloads, size_t n, const TensorView& output,
                             float divisor, size_t* failed) const {
  return sum_sparse_payloads(CodecId::kTopK, kTopKApproxFlag, payloads, n, output, divisor, failed);
}

Status TopKCodec::decode_subtract(const uint8_t* payload, size_t bytes,
                                  const TensorView& residual) const {
  return decode_sparse_payload(CodecId::kTopK, kTopKApproxFlag, payload, bytes, residual,
                               SparseDecode::kSubtract);
}

Status make_topk_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  TopKConfig config;
  int64_t k = -1;
  std::string mode;
  TG_RETURN_IF_ERROR(params.get_double("ratio", 0.01, 0, 1, &config.ratio));
  TG_RETURN_IF_ERROR(params.get_int("k", -1, 0, kMaxSparseCount, &k));
  TG_RETURN_IF_ERROR(params.get_choice("mode", "exact", {"exact", "approx"}, &mode));
  if (params.has("k") && params.has("ratio"))
    return params.invalid("k", "a count, given instead of ratio (not with it)");
  config.k = params.has("k") ? k : -1;
  config.mode = mode == "approx" ? TopKMode::kApprox : TopKMode::kExact;
  return TopKCodec::create(config, codec);
}

}  // namespace tidegate
