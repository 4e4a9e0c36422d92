// PowerSGD as a Codec: "powersgd:rank=4" (canonical "powersgd:rank=<r>", 1 <= r <= 64).
//
// The Codec interface is stateless, so encode() is the single-node compression from a fresh
// start: Q drawn from EncodeContext::seed (identical on every rank), one power-iteration step
// (powersgd_math.h), and the payload carries P and Q; decode() rebuilds P Q^T. encode_with_state()
// is the same with a warm-started Q kept in a caller-owned PowerSgdState, which is how PowerSGD
// is meant to run: the approximation improves from step to step. In the distributed version
// (the collectives issue) the ranks do not exchange these payloads: they allreduce P (summed
// across ranks before it is orthogonalised, so every rank orthogonalises the same P) and then
// Q, using the step functions of powersgd_math.h directly.
//
// The input needs a 2-D shape (TensorView rows x cols, row-major), else INVALID_ARGUMENT. The
// rank used is min(r, rows, cols); when r (rows + cols) >= rows cols the factors would not be
// smaller than the matrix, and the payload carries the matrix dense instead.
//
// Payload, after PayloadHeader (flags: kPowerSgdDenseFlag), count = rows * cols:
//   rows i64 | cols i64 | rank u8 | P (rows x rank) then Q (cols x rank), float32, column-major
//   or, dense: rows i64 | cols i64 | rank u8 = 0 | rows * cols float32
// NaN/Inf in the input is INVALID_ARGUMENT naming the first bad element.
#pragma once

#include <memory>
#include <string>

#include "compress/codec.h"
#include "compress/powersgd_math.h"

namespace tidegate {

inline constexpr uint8_t kPowerSgdDenseFlag = 0x01;
inline constexpr size_t kPowerSgdPrefixBytes = 16 + 8 + 8 + 1;

struct PowerSgdConfig {
  int rank = 4;
};

class PowerSgdCodec final : public Codec {
 public:
  // INVALID_ARGUMENT unless 1 <= rank <= kPowerSgdMaxRank.
  static Status create(const PowerSgdConfig& config, std::unique_ptr<Codec>* codec);

  CodecId id() const override { return CodecId::kPowerSgd; }
  std::string spec() const override;
  // Needs like's 2-D shape for the exact bound; without one (rows x cols = 0 x 0) it returns the
  // dense size, which bounds every shape of that count.
  size_t max_payload_bytes(const TensorView& like) const override;
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override;
  bool deterministic() const override { return false; }        // Q's first draw depends on the seed
  bool wants_error_feedback() const override { return true; }  // Vogels et al.: it needs it

  // encode() with a warm start: uses and updates state's Q (drawn from context.seed the first
  // time, or when the shape or rank changed). Not thread-safe for one state.
  Status encode_with_state(const TensorView& input, const EncodeContext& context,
                           PowerSgdState* state, uint8_t* out, size_t capacity,
                           size_t* written) const;

  const PowerSgdConfig& config() const { return config_; }

 private:
  explicit PowerSgdCodec(const PowerSgdConfig& config) : config_(config) {}
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;
  PowerSgdConfig config_;
};

}  // namespace tidegate
