#include "compress/powersgd.h"

#include <cstring>
#include <vector>

#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/float_output.h"
#include "compress/magnitude_scan.h"
#include "compress/payload.h"
#include "compress/sparse_payload.h"

namespace tidegate {
namespace {

// Factors are sent only when they are smaller than the matrix.
bool factors_pay(int rank, int64_t rows, int64_t cols) {
  return rank > 0 && static_cast<int64_t>(rank) * (rows + cols) < rows * cols;
}

Status check_shape(const TensorView& t) {
  if (t.count == 0) return Status::ok();
  TG_CHECK_ARG(t.rows > 0 && t.cols > 0 && t.count / t.rows == t.cols && t.count % t.rows == 0,
               "powersgd needs the tensor's 2-D shape (rows x cols = count), got " +
                   std::to_string(t.rows) + " x " + std::to_string(t.cols) + " for " +
                   std::to_string(t.count) + " elements");
  return Status::ok();
}

void write_prefix(PayloadWriter* w, tidegate_dtype_t dtype, int64_t count, int64_t rows,
                  int64_t cols, int rank, bool dense) {
  w->header({CodecId::kPowerSgd, static_cast<uint8_t>(dtype),
             dense ? kPowerSgdDenseFlag : uint8_t{0}, count});
  w->put<int64_t>(rows);
  w->put<int64_t>(cols);
  w->put<uint8_t>(static_cast<uint8_t>(rank));
}

}  // namespace

Status PowerSgdCodec::create(const PowerSgdConfig& config, std::unique_ptr<Codec>* codec) {
  TG_CHECK_ARG(config.rank >= 1 && config.rank <= kPowerSgdMaxRank,
               "powersgd: rank must be in [1, " + std::to_string(kPowerSgdMaxRank) + "], got " +
                   std::to_string(config.rank));
  codec->reset(new PowerSgdCodec(config));
  return Status::ok();
}

std::string PowerSgdCodec::spec() const { return "powersgd:rank=" + std::to_string(config_.rank); }

size_t PowerSgdCodec::max_payload_bytes(const TensorView& like) const {
  if (like.count < 0 || like.count > kMaxSparseCount) return kPowerSgdPrefixBytes;
  int64_t floats = like.count;
  if (check_shape(like).is_ok() && like.count > 0) {
    const int rank = powersgd_effective_rank(config_.rank, like.rows, like.cols);
    if (factors_pay(rank, like.rows, like.cols)) floats = rank * (like.rows + like.cols);
  }
  return kPowerSgdPrefixBytes + static_cast<size_t>(floats) * sizeof(float);
}

Status PowerSgdCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                             size_t capacity, size_t* written) const {
  PowerSgdState fresh;  // no warm start: Q is drawn from the seed for this call only
  return encode_with_state(input, context, &fresh, out, capacity, written);
}

Status PowerSgdCodec::encode_with_state(const TensorView& input, const EncodeContext& context,
                                        PowerSgdState* state, uint8_t* out, size_t capacity,
                                        size_t* written) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kPowerSgd, input, "input"));
  TG_RETURN_IF_ERROR(check_shape(input));
  const size_t bound = max_payload_bytes(input);
  TG_CHECK_ARG(capacity >= bound, "powersgd codec: output capacity " + std::to_string(capacity) +
                                      " is below max_payload_bytes " + std::to_string(bound));
  const int64_t count = input.count;
  std::vector<float> converted(input.dtype == TIDEGATE_FLOAT32 ? 0 : static_cast<size_t>(count));
  const float* m = count > 0 ? floats_at(input, 0, count, converted.data()) : nullptr;
  const int64_t rows = count == 0 ? 0 : input.rows;
  const int64_t cols = count == 0 ? 0 : input.cols;
  const int rank = powersgd_effective_rank(config_.rank, rows, cols);
  PayloadWriter writer(out, capacity);
  if (!factors_pay(rank, rows, cols)) {
    const int64_t bad = first_nonfinite(m, count);
    if (bad >= 0) return nonfinite_input(CodecId::kPowerSgd, bad, element_value(input, bad));
    write_prefix(&writer, input.dtype, count, rows, cols, 0, /*dense=*/true);
    writer.bytes(m, static_cast<size_t>(count) * sizeof(float));
  } else {
    std::vector<float> p;
    int64_t bad = -1;
    Status st = powersgd_local_step(m, rows, cols, rank, context.seed, state, &p, &bad);
    if (bad >= 0) return nonfinite_input(CodecId::kPowerSgd, bad, element_value(input, bad));
    TG_RETURN_IF_ERROR(std::move(st));
    write_prefix(&writer, input.dtype, count, rows, cols, rank, /*dense=*/false);
    writer.bytes(p.data(), p.size() * sizeof(float));
    writer.bytes(state->q(), static_cast<size_t>(cols) * rank * sizeof(float));
  }
  TG_RETURN_IF_ERROR(writer.status());
  *written = writer.size();
  return Status::ok();
}

Status PowerSgdCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                                  bool add) const {
  TG_RETURN_IF_ERROR(check_sparse_tensor(CodecId::kPowerSgd, output, "output"));
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(CodecId::kPowerSgd, output.count, &header));
  int64_t rows = 0, cols = 0;
  uint8_t rank = 0;
  TG_RETURN_IF_ERROR(reader.get(&rows));
  TG_RETURN_IF_ERROR(reader.get(&cols));
  TG_RETURN_IF_ERROR(reader.get(&rank));
  const int64_t count = output.count;
  const bool dense = header.flags == kPowerSgdDenseFlag;
  const bool shape_ok = count == 0
                            ? (rows == 0 && cols == 0)
                            : (rows > 0 && cols > 0 && count % rows == 0 && count / rows == cols);
  const bool matches_output =
      (output.rows == 0 && output.cols == 0) || (output.rows == rows && output.cols == cols);
  // Only a shape that matches count bounds rows and cols, which factors_pay() multiplies.
  const bool rank_ok =
      shape_ok &&
      (dense ? rank == 0
             : (rank >= 1 && rank <= kPowerSgdMaxRank && factors_pay(rank, rows, cols)));
  if (!payload_dtype_ok(header.dtype) || (header.flags & ~kPowerSgdDenseFlag) != 0 || !shape_ok ||
      !matches_output || !rank_ok) {
    return protocol_error(
        "powersgd payload is malformed or for another shape: " + std::to_string(rows) + " x " +
        std::to_string(cols) + " rank " + std::to_string(rank) + ", flags " +
        std::to_string(header.flags) + ", for a tensor of " + std::to_string(count) + " elements");
  }
  // factors_pay() bounded rank * (rows + cols) by count, so this cannot overflow.
  const int64_t floats = dense ? count : rank * (rows + cols);
  if (reader.remaining() != static_cast<size_t>(floats) * sizeof(float)) {
    return protocol_error("powersgd payload has " + std::to_string(reader.remaining()) +
                          " bytes of data; expected " +
                          std::to_string(static_cast<size_t>(floats) * sizeof(float)));
  }
  const uint8_t* data = nullptr;
  TG_RETURN_IF_ERROR(reader.take(reader.remaining(), &data));
  // The factors are what encode() computed from finite input; anything else is not a payload.
  if (!packed_floats_finite(data, floats))
    return protocol_error("powersgd payload holds a NaN or infinite value");
  FloatOutput out(output, add);
  float* y = out.data();
  if (dense) {
    for (int64_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, data + static_cast<size_t>(i) * sizeof(float), sizeof v);
      y[i] = out.add() ? y[i] + v : v;
    }
  } else {
    std::vector<float> factors(static_cast<size_t>(floats));  // aligned copies of P and Q
    std::memcpy(factors.data(), data, factors.size() * sizeof(float));
    powersgd_reconstruct(factors.data(), factors.data() + rows * rank, rows, cols, rank, y,
                         out.add());
  }
  out.commit();
  return Status::ok();
}

Status PowerSgdCodec::decode(const uint8_t* payload, size_t bytes, const TensorView& output) const {
  return decode_into(payload, bytes, output, /*add=*/false);
}

Status PowerSgdCodec::decode_add(const uint8_t* payload, size_t bytes,
                                 const TensorView& output) const {
  return decode_into(payload, bytes, output, /*add=*/true);
}

Status make_powersgd_codec(CodecParams& params, std::unique_ptr<Codec>* codec) {
  int64_t rank = 0;
  TG_RETURN_IF_ERROR(params.get_int("rank", 4, 1, kPowerSgdMaxRank, &rank));
  return PowerSgdCodec::create({static_cast<int>(rank)}, codec);
}

}  // namespace tidegate
