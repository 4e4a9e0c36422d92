#include "compress/sparse_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compress/bitpack.h"
#include "compress/sparse_entries.h"
#include "compress/sparse_payload.h"

namespace tidegate {
namespace {

// Floats per block: 32 KiB, so a block stays in the core's cache while every payload adds into
// it.
constexpr int64_t kBlockFloats = 8192;

}  // namespace

Status sum_sparse_payloads(CodecId codec, uint8_t allowed_codec_flags, const PayloadSpan* payloads,
                           size_t n, const TensorView& output, float divisor, size_t* failed) {
  TG_RETURN_IF_ERROR(check_sparse_tensor(codec, output, "output"));
  TG_CHECK_ARG(output.dtype == TIDEGATE_FLOAT32, std::string(codec_name(codec)) +
                                                     " codec: a sum of payloads needs a float32 " +
                                                     "output, not " + dtype_name(output.dtype));
  std::vector<SparseEntryCursor> cursors;
  cursors.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ParsedSparsePayload parsed;
    Status st = parse_sparse_payload(codec, allowed_codec_flags, payloads[i].data,
                                     payloads[i].bytes, output.count, &parsed);
    if (!st.is_ok()) {
      *failed = i;
      return st;
    }
    cursors.emplace_back(parsed);
  }
  // x / d and x * (1 / d) are the same correctly rounded number when d is a power of two (1 / d
  // is then exact), and multiplying is the cheaper; any other divisor divides.
  int exponent = 0;
  const bool power_of_two = std::frexp(divisor, &exponent) == 0.5f;
  const float reciprocal = 1.0f / divisor;
  float* out = static_cast<float*>(output.data);
  for (int64_t begin = 0; begin < output.count; begin += kBlockFloats) {
    const int64_t end = std::min(output.count, begin + kBlockFloats);
    std::fill(out + begin, out + end, 0.0f);
    for (SparseEntryCursor& cursor : cursors) {
      cursor.visit_below(end, [out](int64_t i, float v) { out[i] += v; });
    }
    if (divisor == 1.0f) continue;
    if (power_of_two) {
      for (int64_t i = begin; i < end; ++i) out[i] *= reciprocal;
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] /= divisor;
    }
  }
  return Status::ok();
}

}  // namespace tidegate
