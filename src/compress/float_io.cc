#include "compress/float_io.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "compress/half_vec.h"
#include "compress/simd.h"
#include "numeric/half.h"

namespace tidegate {

Status check_codec_tensor(CodecId codec, const TensorView& t, const char* role) {
  const std::string where = std::string(codec_name(codec)) + " codec " + role;
  if (t.memory != TIDEGATE_MEMORY_HOST) {
    return unsupported(
        where +
        " is in device memory: the CPU codecs need host memory (CUDA kernels are separate)");
  }
  if (t.dtype != TIDEGATE_FLOAT32 && t.dtype != TIDEGATE_FLOAT64 && t.dtype != TIDEGATE_FLOAT16 &&
      t.dtype != TIDEGATE_BFLOAT16) {
    return unsupported(where + " has dtype " + dtype_name(t.dtype) +
                       ": codecs take float32, float64, float16 or bfloat16");
  }
  if (t.count < 0)
    return invalid_argument(where + " has a negative count " + std::to_string(t.count));
  if (t.count > 0 && t.data == nullptr)
    return invalid_argument(where + " has count " + std::to_string(t.count) + " but no data");
  return Status::ok();
}

TG_VECTOR_CLONES int64_t first_nonfinite(const float* TG_RESTRICT x, int64_t n) {
  // An OR over the whole range vectorises; only a failing range pays for the scalar search.
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (float_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
  if (bad == 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

Status nonfinite_input(CodecId codec, int64_t index, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return invalid_argument(
      std::string(codec_name(codec)) + " codec: input element " + std::to_string(index) + " is " +
      text +
      " (codecs reject NaN, infinity and values their float32 arithmetic cannot "
      "represent; the residual was left unchanged)");
}

double element_value(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case TIDEGATE_FLOAT64:
      return static_cast<const double*>(t.data)[i];
    case TIDEGATE_FLOAT16:
      return half_to_float(static_cast<const uint16_t*>(t.data)[i]);
    case TIDEGATE_BFLOAT16:
      return bf16_to_float(static_cast<const uint16_t*>(t.data)[i]);
    default:
      return static_cast<const float*>(t.data)[i];
  }
}

namespace {

TG_VECTOR_CLONES void halves_to_floats(const uint16_t* TG_RESTRICT in, int64_t n,
                                       float* TG_RESTRICT out) {
  for (int64_t first = 0; first < n; first += half_vec::kMaxChunk) {
    const int64_t m = std::min(half_vec::kMaxChunk, n - first);
    half_vec::halves_to_floats(in + first, m, out + first, false);
  }
}
TG_VECTOR_CLONES void bf16s_to_floats(const uint16_t* TG_RESTRICT in, int64_t n,
                                      float* TG_RESTRICT out) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}
TG_VECTOR_CLONES void doubles_to_floats(const double* TG_RESTRICT in, int64_t n,
                                        float* TG_RESTRICT out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}
TG_VECTOR_CLONES void floats_to_halves(const float* TG_RESTRICT in, int64_t n, bool add,
                                       uint16_t* TG_RESTRICT out) {
  float sum[half_vec::kMaxChunk];  // add: widen, add once in float, round once
  for (int64_t first = 0; first < n; first += half_vec::kMaxChunk) {
    const int64_t m = std::min(half_vec::kMaxChunk, n - first);
    const float* values = in + first;
    if (add) {
      half_vec::halves_to_floats(out + first, m, sum, false);
      for (int64_t i = 0; i < m; ++i) sum[i] += in[first + i];
      values = sum;
    }
    (void)half_vec::floats_to_halves<true>(values, m, out + first);  // non-finite results are kept
  }
}
TG_VECTOR_CLONES void floats_to_bf16s(const float* TG_RESTRICT in, int64_t n, bool add,
                                      uint16_t* TG_RESTRICT out) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(bf16_to_float(out[i]) + in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
  }
}
TG_VECTOR_CLONES void floats_to_doubles(const float* TG_RESTRICT in, int64_t n, bool add,
                                        double* TG_RESTRICT out) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] += in[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i];
  }
}

}  // namespace

TG_VECTOR_CLONES void add_floats(const float* TG_RESTRICT src, int64_t n, float* TG_RESTRICT dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

TG_VECTOR_CLONES void add_floats_into(const float* TG_RESTRICT a, const float* TG_RESTRICT b,
                                      int64_t n, float* TG_RESTRICT dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

void load_floats(const TensorView& t, int64_t offset, int64_t n, float* dst) {
  switch (t.dtype) {
    case TIDEGATE_FLOAT64:
      doubles_to_floats(static_cast<const double*>(t.data) + offset, n, dst);
      break;
    case TIDEGATE_FLOAT16:
      halves_to_floats(static_cast<const uint16_t*>(t.data) + offset, n, dst);
      break;
    case TIDEGATE_BFLOAT16:
      bf16s_to_floats(static_cast<const uint16_t*>(t.data) + offset, n, dst);
      break;
    default:
      if (n > 0)
        std::memcpy(dst, static_cast<const float*>(t.data) + offset,
                    static_cast<size_t>(n) * sizeof(float));
  }
}

void store_floats(const float* src, int64_t n, const TensorView& t, int64_t offset, bool add) {
  switch (t.dtype) {
    case TIDEGATE_FLOAT64:
      floats_to_doubles(src, n, add, static_cast<double*>(t.data) + offset);
      break;
    case TIDEGATE_FLOAT16:
      floats_to_halves(src, n, add, static_cast<uint16_t*>(t.data) + offset);
      break;
    case TIDEGATE_BFLOAT16:
      floats_to_bf16s(src, n, add, static_cast<uint16_t*>(t.data) + offset);
      break;
    default:
      if (add) {
        add_floats(src, n, static_cast<float*>(t.data) + offset);
      } else if (n > 0) {
        std::memcpy(static_cast<float*>(t.data) + offset, src,
                    static_cast<size_t>(n) * sizeof(float));
      }
  }
}

}  // namespace tidegate
