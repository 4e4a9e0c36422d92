// Scaled sign (EF-SignSGD, Karimireddy et al., 2019): one bit per element, x < 0, and one scale
// for the tensor, the mean of |x|; decode gives +-scale. Deterministic and biased: it is meant
// to run with error feedback, which is what makes it converge.
//   PayloadHeader (codec, dtype, count) | f32 scale | 4 zero bytes | packed_bytes(count, 1) bits
// The scale is defined so that it does not depend on threads or vector width (and a GPU kernel
// can reproduce it): the tensor is cut into blocks of 4096 elements; each block's sum of |x| is
// a double sum in lane order (lane_reduce.h); block sums are added in block order; the total is
// divided by count and rounded to float32 (0 for an empty tensor).
// Spec: efsign (no parameters).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compress/bitpack.h"
#include "compress/codec_spec.h"
#include "compress/float_io.h"
#include "compress/lane_reduce.h"
#include "compress/parallel.h"
#include "compress/payload.h"
#include "compress/sign_bits.h"
#include "numeric/half.h"

namespace tidegate {

namespace {

constexpr int64_t kBlock = kSignBlock;
constexpr size_t kParamBytes = 8;

// Sign bits of x[0, n) and the block's sum of |x|; false when some element is not finite.
// Cloned so lane_sum_abs (inlined here) gets the wide instruction sets too.
TG_VECTOR_CLONES bool efsign_block(const float* TG_RESTRICT x, int64_t n, uint8_t* packed,
                                   double* abs_sum) {
  const bool finite = pack_signs(x, n, packed);
  *abs_sum = lane_sum_abs(x, n);
  return finite;
}

class EfSignCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kEfSign; }
  std::string spec() const override { return "efsign"; }
  bool deterministic() const override { return true; }
  bool wants_error_feedback() const override { return true; }

  size_t max_payload_bytes(const TensorView& like) const override {
    return kPayloadHeaderBytes + kParamBytes + packed_bytes(static_cast<uint64_t>(like.count), 1);
  }
  Status encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                size_t capacity, size_t* written) const override;
  Status decode(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, false);
  }
  Status decode_add(const uint8_t* payload, size_t bytes, const TensorView& output) const override {
    return decode_into(payload, bytes, output, true);
  }

 private:
  Status decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                     bool add) const;
};

Status EfSignCodec::encode(const TensorView& input, const EncodeContext& context, uint8_t* out,
                           size_t capacity, size_t* written) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), input, "input"));
  const size_t total = max_payload_bytes(input);
  TG_CHECK_ARG(capacity >= total, "efsign codec: output capacity " + std::to_string(capacity) +
                                      " is below max_payload_bytes " + std::to_string(total));
  PayloadWriter writer(out, capacity);
  writer.header({id(), static_cast<uint8_t>(input.dtype), 0, input.count});
  uint8_t* scale_at = writer.claim(kParamBytes);
  uint8_t* bits = writer.claim(packed_bytes(static_cast<uint64_t>(input.count), 1));
  TG_RETURN_IF_ERROR(writer.status());
  const int64_t blocks = (input.count + kBlock - 1) / kBlock;
  std::vector<double> block_sums(static_cast<size_t>(blocks));
  TG_RETURN_IF_ERROR(parallel_ranges(context.threads, blocks, 64, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(input.dtype == TIDEGATE_FLOAT32 ? 0 : kBlock);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kBlock;
      const int64_t n = std::min(kBlock, input.count - first);
      const float* x = floats_at(input, first, n, scratch.data());
      if (!efsign_block(x, n, bits + first / 8, &block_sums[static_cast<size_t>(b)])) {
        const int64_t bad = first + first_nonfinite(x, n);
        return nonfinite_input(id(), bad, element_value(input, bad));
      }
    }
    return Status::ok();
  }));
  double sum = 0;
  for (double s : block_sums) sum += s;
  const float scale =
      input.count > 0 ? static_cast<float>(sum / static_cast<double>(input.count)) : 0.0f;
  std::memcpy(scale_at, &scale, sizeof scale);
  std::memset(scale_at + sizeof scale, 0, kParamBytes - sizeof scale);
  *written = writer.size();
  return Status::ok();
}

Status EfSignCodec::decode_into(const uint8_t* payload, size_t bytes, const TensorView& output,
                                bool add) const {
  TG_RETURN_IF_ERROR(check_codec_tensor(id(), output, "output"));
  PayloadReader reader(payload, bytes);
  PayloadHeader header;
  TG_RETURN_IF_ERROR(reader.header(id(), output.count, &header));
  float scale = 0;
  uint32_t reserved = 0;
  TG_RETURN_IF_ERROR(reader.get(&scale));
  TG_RETURN_IF_ERROR(reader.get(&reserved));
  if (!std::isfinite(scale) || scale < 0)
    return protocol_error("efsign payload has an invalid scale");
  const size_t data = packed_bytes(static_cast<uint64_t>(output.count), 1);
  if (reader.remaining() != data) {
    return protocol_error("efsign payload is " + std::to_string(bytes) + " bytes; " +
                          std::to_string(output.count) + " elements need exactly " +
                          std::to_string(max_payload_bytes(output)));
  }
  const uint8_t* packed = nullptr;
  TG_RETURN_IF_ERROR(reader.take(data, &packed));
  float values[kBlock];
  const bool direct = output.dtype == TIDEGATE_FLOAT32;
  for (int64_t first = 0; first < output.count; first += kBlock) {
    const int64_t n = std::min(kBlock, output.count - first);
    if (direct) {
      unpack_signs(packed + first / 8, n, scale, static_cast<float*>(output.data) + first, add);
    } else {
      unpack_signs(packed + first / 8, n, scale, values, false);
      store_floats(values, n, output, first, add);
    }
  }
  return Status::ok();
}

}  // namespace

Status make_efsign_codec(CodecParams&, std::unique_ptr<Codec>* codec) {
  *codec = std::make_unique<EfSignCodec>();
  return Status::ok();
}

}  // namespace tidegate
