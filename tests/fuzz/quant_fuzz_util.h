// Shared body of the quantiser decoder fuzz targets (none, fp16, bf16, qsgd, maxmin, terngrad,
// signsgd, efsign, onebit): the fuzzer's bytes are the payload, untouched. The output tensor's
// count comes from the payload's own header (clamped small) so that inputs get past the count
// check. Checked: decode and decode_add into float32, float64, float16 and bfloat16 tensors
// return OK or PROTOCOL and nothing else, never touch memory out of bounds (ASan) or hit
// undefined behaviour (UBSan); a rejected payload leaves the output unchanged; an accepted
// quantised payload decodes to finite values (its scales were validated); for summable codecs,
// a payload summed with itself stays decodable.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace tidegate::fuzz {

inline std::unique_ptr<Codec> quant_codec_or_die(const char* spec) {
  std::unique_ptr<Codec> codec;
  if (!make_codec(spec, &codec).is_ok()) std::abort();
  return codec;
}

inline void ok_or_protocol(const Status& st) {
  if (!st.is_ok() && st.code() != TIDEGATE_ERR_PROTOCOL) std::abort();
}

inline int64_t payload_count(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxCount = 1 << 14;
  int64_t count = 64;
  if (size >= 16) std::memcpy(&count, data + 8, sizeof count);
  if (count < 0 || count > kMaxCount) count = static_cast<int64_t>(size % 97);
  return count;
}

template <typename T>
void decode_into(const Codec& codec, const uint8_t* data, size_t size, int64_t count,
                 tidegate_dtype_t dtype, T fill, bool finite_values) {
  std::vector<T> out(static_cast<size_t>(count), fill);
  TensorView view;
  view.data = out.data();
  view.count = count;
  view.dtype = dtype;
  const Status decoded = codec.decode(data, size, view);
  ok_or_protocol(decoded);
  if (!decoded.is_ok()) {
    for (const T& v : out) {
      if (std::memcmp(&v, &fill, sizeof v) != 0) std::abort();  // rejected: untouched
    }
  } else if (finite_values && dtype == TIDEGATE_FLOAT32) {
    for (const T& v : out) {
      float f;
      std::memcpy(&f, &v, sizeof f);
      if (!std::isfinite(f)) std::abort();
    }
  }
  const Status added = codec.decode_add(data, size, view);
  ok_or_protocol(added);
  if (added.is_ok() != decoded.is_ok()) std::abort();
}

// raw: element values are carried as they are (none, fp16, bf16), so they need not be finite.
inline void fuzz_quantiser_decode(const Codec& codec, const uint8_t* data, size_t size, bool raw) {
  const int64_t count = payload_count(data, size);
  decode_into<float>(codec, data, size, count, TIDEGATE_FLOAT32, 1.0f, !raw);
  decode_into<double>(codec, data, size, count, TIDEGATE_FLOAT64, 2.0, false);
  decode_into<uint16_t>(codec, data, size, count, TIDEGATE_FLOAT16, uint16_t{0x3c00}, false);
  decode_into<uint16_t>(codec, data, size, count, TIDEGATE_BFLOAT16, uint16_t{0x3f80}, false);
  if (!codec.payloads_summable()) return;
  TensorView like;
  like.count = count;
  std::vector<uint8_t> sum(codec.max_summed_payload_bytes(like, int64_t{1} << 31));
  size_t written = 0;
  const Status summed =
      codec.sum_payloads(data, size, data, size, like, sum.data(), sum.size(), &written);
  if (!summed.is_ok()) {
    if (summed.code() != TIDEGATE_ERR_PROTOCOL && summed.code() != TIDEGATE_ERR_INVALID_ARGUMENT)
      std::abort();
    return;
  }
  if (written > sum.size()) std::abort();
  std::vector<float> out(static_cast<size_t>(count));
  TensorView view = like;
  view.data = out.data();
  if (!codec.decode(sum.data(), written, view).is_ok())
    std::abort();  // a sum of valid payloads is valid
}

}  // namespace tidegate::fuzz
