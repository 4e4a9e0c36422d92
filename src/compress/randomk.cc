#include "compress/randomk.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/float_output.h"
#include "compress/magnitude_scan.h"
#include "compress/payload.h"
#include "compress/seeded_random.h"
#include "compress/sparse_payload.h"
#include "compress/topk.h"

namespace tidegate {
namespace {

// Walks the k strata of [0, n) in order without a division per stratum: stratum j starts at
// floor(j n / k) = j q + floor(j r / k) with n = q k + r, and the second term is carried as a
// running remainder.
class Strata {
 public:
  Strata(int64_t n, int64_t k) : k_(k), quotient_(n / k), remainder_(n % k) {}  // k >= 1
  // Start and length of the next stratum.
  void next(int64_t* begin, int64_t* length) {
    *begin = begin_;
    carry_ += remainder_;
    int64_t step = quotient_;
    if (carry_ >= k_) {
      carry_ -= k_;
      ++step;
    }
    *length = step;
    begin_ += step;
  }

 private:
  int64_t k_, quotient_, remainder_;
  int64_t begin_ = 0;
  int64_t carry_ = 0;  // (j r) mod k
};

Status check_capacity(size_t capacity, size_t bound) {
  TG_CHECK_ARG(capacity >= bound, "randomk encode: output capacity " + std::to_string(capacity) +
                                      " is below max_payload_bytes " + std::to_string(bound));
  return Status::ok();
}

// Writes the k sampled values (scaled by their stratum's length when unbiased). False when a
// scaled value overflowed float32; *bad is then that element's index.
bool sample_values(const float* x, int64_t n, int64_t k, uint64_t seed, bool unbiased,
                   uint8_t* values, int64_t* bad) {
  if (k == 0) return true;
  Strata strata(n, k);
  for (int64_t j = 0; j < k; ++j) {
    int64_t begin = 0, length = 0;
    strata.next(&begin, &length);
    const int64_t index = begin + static_cast<int64_t>(seeded_below(seed, static_cast<uint64_t>(j),
                                                                    static_cast<uint64_t>(length)));
    float v = x[index];
    if (unbiased) v *= static_cast<float>(length);
    if (!std::isfinite(v)) {
      *bad = index;
      return false;
    }
    std::memcpy(values + static_cast<size_t>(j) * sizeof(float), &v, sizeof v);
  }
  return true;
}

}  // namespace

int64_t randomk_index(uint64_t seed, int64_t j, int64_t k, int64_t n, int64_t* stratum_length) {
  const auto begin = static_cast<int64_t>(static_cast<seeded_u128>(j) * static_cast<uint64_t>(n) /
                                          static_cast<uint64_t>(k));
  const auto end = static_cast<int64_t>(static_cast<seeded_u128>(j + 1) * static_cast<uint64_t>(n) /
                                        static_cast<uint64_t>(k));
  if (stratum_length != nullptr) *stratum_length = end - begin;
  return begin + static_cast<int64_t>(seeded_below(seed, static_cast<uint64_t>(j),
                                                   static_cast<uint64_t>(end - begin)));
}

Status RandomKCodec::create(const RandomKConfig& config, std::unique_ptr<Codec>* codec) {
  if (config.k < 0) {
    TG_CHECK_ARG(std::isfinite(config.ratio) && config.ratio >= 0 && config.ratio <= 1,
                 "randomk: ratio must be in [0, 1], got " + format_spec_double(config.ratio));
  }
  codec->reset(new RandomKCodec(config));
  return Status::ok();
}

std::string RandomKCodec::spec() const {
  const std::string size = config_.k >= 0 ? "k=" + std::to_string(config_.k)
                                          : "ratio=" + format_spec_double(config_.ratio);
  return "randomk:" + size + (config_.unbiased ? ",unbiased=1" : ",unbiased=0");
}

int64_t RandomKCodec::k_for(int64_t count) const {
  if (count <= 0) return 0;
  return config_.k >= 0 ? std::min(config_.k, count) : k_from_ratio(config_.ratio, count);
}

size_t RandomKCodec::max_payload_bytes(const TensorView& like) const {
  if (like.count < 0 || like.count > kMaxSparseCount) return kRandomKPrefixBytes;
  return kRandomKPrefixBytes + static_cast<size_t>(k_for(like.count)) * sizeof(float);
}

Status RandomKCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                            size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kRandomK, input, "input"));
  TG_RETURN_IF_ERROR(check_capacity(capacity, max_payload_bytes(input)));
  const int64_t n = input.count;
  std::vector<float> converted(input.dtype == TIDEGATE_FLOAT32 ? 0 : static_cast<size_t>(n));
  const float* x = n > 0 ? floats_at(input, 0, n, converted.data()) : nullptr;
  // The whole tensor is checked, not only the sampled elements: an unsent NaN would poison the
  // error-feedback residual instead.
  int64_t bad = first_nonfinite(x, n);
  if (bad >= 0) return nonfinite_input(CodecId::kRandomK, bad, element_value(input, bad));
  const int64_t k = k_for(n);
  const bool dense = k >= n;
  const uint8_t flags = dense ? kRandomKDenseFlag : (config_.unbiased ? kRandomKScaledFlag : 0);
  PayloadWriter writer(out, capacity);
  writer.header({CodecId::kRandomK, static_cast<uint8_t>(input.dtype), flags, n});
  writer.put<int64_t>(k);
  writer.put<uint64_t>(context.seed);
  if (dense) {
    writer.bytes(x, static_cast<size_t>(n) * sizeof(float));
  } else if (uint8_t* values = writer.claim(static_cast<size_t>(k) * sizeof(float))) {
    if (!sample_values(x, n, k, context.seed, config_.unbiased, values, &bad)) {
      return nonfinite_input(CodecId::kRandomK, bad,
                             element_value(input, bad));  // x * n/k overflowed
    }
  }
  TG_RETURN_IF_ERROR(writer.status());
  *written = writer.size();
  return Status::ok();
}

Status RandomKCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                                 bool add) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kRandomK, output, "output"));
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(CodecId::kRandomK, output.count, &header));
  const int64_t n = output.count;
  int64_t k = 0;
  uint64_t seed = 0;
  TG_RETURN_IF_ERROR(reader.get(&k));
  TG_RETURN_IF_ERROR(reader.get(&seed));
  const bool dense = (header.flags & kRandomKDenseFlag) != 0;
  if (!payload_dtype_ok(header.dtype) ||
      (header.flags & ~(kRandomKScaledFlag | kRandomKDenseFlag)) != 0 ||
      header.flags == (kRandomKScaledFlag | kRandomKDenseFlag) || k < 0 || k > n ||
      (dense && k != n) || (!dense && k == n && n > 0)) {
    return protocol_error("randomk payload is malformed: dtype #" + std::to_string(header.dtype) +
                          ", flags " + std::to_string(header.flags) + ", k " + std::to_string(k) +
                          " of " + std::to_string(n));
  }
  if (reader.remaining() != static_cast<size_t>(k) * sizeof(float)) {
    return protocol_error("randomk payload has " + std::to_string(reader.remaining()) +
                          " bytes of values for k = " + std::to_string(k));
  }
  const uint8_t* values = nullptr;
  TG_RETURN_IF_ERROR(reader.take(reader.remaining(), &values));
  if (!packed_floats_finite(values, k))
    return protocol_error("randomk payload holds a NaN or infinite value");
  FloatOutput out(output, add);
  float* y = out.data();
  if (dense) {
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, values + static_cast<size_t>(i) * sizeof(float), sizeof v);
      y[i] = out.add() ? y[i] + v : v;
    }
  } else {
    if (!out.add() && n > 0) std::memset(y, 0, static_cast<size_t>(n) * sizeof(float));
    Strata strata(n, std::max<int64_t>(k, 1));
    for (int64_t j = 0; j < k; ++j) {
      int64_t begin = 0, length = 0;
      strata.next(&begin, &length);
      float v;
      std::memcpy(&v, values + static_cast<size_t>(j) * sizeof(float), sizeof v);
      float& target = y[begin + static_cast<int64_t>(seeded_below(seed, static_cast<uint64_t>(j),
                                                                  static_cast<uint64_t>(length)))];
      target = out.add() ? target + v : v;  // overwrite keeps the sent bits (-0.0 stays -0.0)
    }
  }
  out.commit();
  return Status::ok();
}

Status RandomKCodec::decode(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_into(payload, bytes, output, /*add=*/false);
}

Status RandomKCodec::decode_add(const uint8_t* payload, size_t bytes,
                                const TensorView& output) const {
  return decode_into(payload, bytes, output, /*add=*/true);
}

Status make_randomk_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  RandomKConfig config;
  int64_t k = -1;
  TG_RETURN_IF_ERROR(params.get_double("ratio", 0.01, 0, 1, &config.ratio));
  TG_RETURN_IF_ERROR(params.get_int("k", -1, 0, kMaxSparseCount, &k));
  TG_RETURN_IF_ERROR(params.get_bool("unbiased", false, &config.unbiased));
  if (params.has("k") && params.has("ratio"))
    return params.invalid("k", "a count, given instead of ratio (not with it)");
  config.k = params.has("k") ? k : -1;
  return RandomKCodec::create(config, codec);
}

}  // namespace tidegate
