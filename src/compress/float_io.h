// Element access shared by the codecs: every codec computes in float32, so tensors of the other
// floating dtypes are converted block by block (f16/bf16 exactly, f64 rounded to nearest), and
// the common input checks and the non-finite policy (codec.h) live here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "base/types.h"
#include "compress/codec.h"

namespace tidegate {

// Checks that a tensor can be encoded from / decoded into on the CPU: host memory, a floating
// dtype, count >= 0 and data present when count > 0. `role` ("input", "output") goes into the
// message.
Status check_codec_tensor(CodecId codec, const TensorView& t, const char* role);

// Index of the first element of x[0, n) that is NaN or infinite, or -1.
int64_t first_nonfinite(const float* x, int64_t n);

// The error of the non-finite policy: INVALID_ARGUMENT naming the codec, the element and value.
Status nonfinite_input(CodecId codec, int64_t index, double value);

// Element i of t as a double (error messages and tests).
double element_value(const TensorView& t, int64_t i);

// Converts t[offset, offset + n) to float into dst.
void load_floats(const TensorView& t, int64_t offset, int64_t n, float* dst);

// Writes src[0, n) into t[offset, offset + n), converted to t's dtype (round to nearest even),
// or adds it (t[i] = round(t[i] + src[i]), one rounding per element) when add is true.
void store_floats(const float* src, int64_t n, const TensorView& t, int64_t offset, bool add);

// Pointer to t[offset, offset + n) as floats: t's own memory for float32, else a conversion
// into scratch (which must hold n floats).
inline const float* floats_at(const TensorView& t, int64_t offset, int64_t n, float* scratch) {
  if (t.dtype == TIDEGATE_FLOAT32) return static_cast<const float*>(t.data) + offset;
  load_floats(t, offset, n, scratch);
  return scratch;
}

// dst[i] += src[i] (float32), vectorised.
void add_floats(const float* src, int64_t n, float* dst);
// dst[i] = a[i] + b[i] (float32), vectorised: the same bits as copying a and adding b, in one
// pass over memory instead of two.
void add_floats_into(const float* a, const float* b, int64_t n, float* dst);

}  // namespace tidegate
