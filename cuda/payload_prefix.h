// The bytes that precede a payload's body (PayloadHeader plus the codec's parameter bytes),
// built on the host with the CPU codecs' own PayloadWriter so that the two paths cannot drift
// apart, and handed to a kernel by value as at most three 64-bit words. Kept out of the .cu
// files so that nvcc never parses the library's status/tensor headers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tidegate::cuda {

struct PayloadPrefix {
  uint64_t word[3] = {0, 0, 0};
  int words = 0;  // 2 (header only) or 3 (header + 8 parameter bytes)
};

// Prefix of a payload of `codec` (a CodecId value) for n float32 elements, followed by
// param_bytes (0 or 8) parameter bytes.
PayloadPrefix payload_prefix(uint8_t codec, int64_t n, const uint8_t* params, size_t param_bytes);

// The codec ids the kernels produce (checked against compress/codec.h in payload_prefix.cc).
inline constexpr uint8_t kFp16Id = 1, kBf16Id = 2, kQsgdId = 6, kMaxMinId = 7, kTernGradId = 8,
                         kSignSgdId = 9, kEfSignId = 10, kOneBitId = 11;

}  // namespace tidegate::cuda
