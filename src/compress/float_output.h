// A float32 target for the decoders of the sparsifiers and PowerSGD, whatever the output's
// floating dtype (codec.h: payloads do not depend on the dtype). For a float32 output the
// decoder writes straight into it, in the caller's mode (overwrite or add); for float64,
// float16 and bfloat16 it decodes into a float32 scratch (overwriting) and commit() converts
// that into the output with store_floats(), which adds with one rounding per element in add
// mode. The scratch costs a pass over the tensor, which only the non-float32 dtypes pay.
#pragma once

#include <vector>

#include "base/types.h"
#include "compress/float_io.h"

namespace tidegate {

class FloatOutput {
 public:
  FloatOutput(const TensorView& output, bool add) : output_(output), add_(add) {
    if (output.dtype != TIDEGATE_FLOAT32) scratch_.assign(static_cast<size_t>(output.count), 0.0f);
  }
  float* data() { return direct() ? static_cast<float*>(output_.data) : scratch_.data(); }
  // The mode to decode into data() with.
  bool add() const { return direct() && add_; }
  // Moves a scratch result into the output; nothing to do for float32.
  void commit() {
    if (!direct()) store_floats(scratch_.data(), output_.count, output_, 0, add_);
  }

 private:
  bool direct() const { return output_.dtype == TIDEGATE_FLOAT32; }
  TensorView output_;
  bool add_;
  std::vector<float> scratch_;
};

}  // namespace tidegate
