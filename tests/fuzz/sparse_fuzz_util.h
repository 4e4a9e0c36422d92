// Shared body of the sparsifier and PowerSGD decoder fuzz targets: the fuzzer's bytes are the
// payload, untouched. The output tensor is sized from the payload's own header (count, and for
// PowerSGD the shape), clamped small, so the fuzzer reaches past the count check; it is decoded
// into float32 (overwrite and add) and into bfloat16 (the scratch path of FloatOutput). The
// contract checked: the decoder returns OK or PROTOCOL, never another code, never touches
// memory out of bounds (ASan) or hits undefined behaviour (UBSan), and an OK overwrite-decode
// of a sparse payload yields only finite values.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/types.h"
#include "compress/codec.h"

namespace tidegate::fuzz {

inline std::unique_ptr<Codec> make_or_die(const char* spec) {
  std::unique_ptr<Codec> codec;
  if (!make_codec(spec, &codec).is_ok()) std::abort();
  return codec;
}

inline int64_t read_i64(const uint8_t* data, size_t size, size_t offset, int64_t fallback) {
  if (size < offset + 8) return fallback;
  int64_t v;
  std::memcpy(&v, data + offset, 8);
  return v;
}

inline void expect_ok_or_protocol(const Status& st) {
  if (!st.is_ok() && st.code() != TIDEGATE_ERR_PROTOCOL) std::abort();
}

// matrix: take rows x cols from payload bytes [16, 32) when they match the count.
inline void fuzz_decode(const Codec& codec, const uint8_t* data, size_t size, bool matrix,
                        bool sparse) {
  constexpr int64_t kMaxCount = 1 << 14;
  int64_t count = read_i64(data, size, 8, 64);
  if (count < 0 || count > kMaxCount) count = static_cast<int64_t>(size % 97);
  int64_t rows = 0, cols = 0;
  if (matrix) {
    const int64_t r = read_i64(data, size, 16, 0), c = read_i64(data, size, 24, 0);
    if (r > 0 && c > 0 && r <= count && count % r == 0 && count / r == c) rows = r, cols = c;
  }
  std::vector<float> out(static_cast<size_t>(count), 1.0f);
  TensorView view;
  view.data = out.data();
  view.count = count;
  view.rows = rows;
  view.cols = cols;
  const Status decoded = codec.decode(data, size, view);
  expect_ok_or_protocol(decoded);
  if (decoded.is_ok() && sparse) {
    for (float v : out) {
      if (!std::isfinite(v)) std::abort();
    }
  }
  expect_ok_or_protocol(codec.decode_add(data, size, view));
  std::vector<uint16_t> half(static_cast<size_t>(count), 0);
  view.data = half.data();
  view.dtype = TIDEGATE_BFLOAT16;
  expect_ok_or_protocol(codec.decode_add(data, size, view));
}

}  // namespace tidegate::fuzz
