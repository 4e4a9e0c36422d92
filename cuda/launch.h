// CUDA encoders of the deterministic and counter-seeded codecs, behind plain host functions
// (DESIGN.md: nothing outside cuda/ includes a CUDA header). Each launch_*_encode writes a
// complete payload - the 16-byte PayloadHeader, the codec's parameter bytes and the packed
// body - into device memory, byte for byte what the CPU codec of the same spec writes for the
// same float32 input and seed (src/compress/*.cc define the formulas; the kernels evaluate them
// in the same float32/float64 operations, in the same lane order, without FMA contraction).
//
// Conventions (DeepSpeed csrc/includes/quantization.h style: out first, then in, n, settings,
// stream):
//   - out, in, bad_index and workspace are device pointers; out and in must be 16-byte aligned
//     (cudaMalloc memory is). out must hold the CPU codec's max_payload_bytes() for n elements.
//   - n is the element count (int64_t; 0 is valid and writes only the prefix).
//   - stream is a cudaStream_t passed as void* (nullptr = the legacy default stream). Work is
//     only enqueued: the call returns before the kernels run.
//   - bad_index receives the non-finite policy's verdict (codec.h): it is reset to a value above
//     every index (0x7f7f7f7f7f7f7f7f), and
//     a kernel lowers it to the index of the first element it must refuse (NaN, infinity, a
//     finite value that rounds to infinity, or - for a bucket whose scale overflows float32 -
//     the bucket's first element). After the stream completes, *bad_index < n means "refused":
//     the CPU codec returns INVALID_ARGUMENT for that same element and the payload bytes are
//     meaningless. Keeping the verdict on the device lets a caller chain encode and send
//     without a synchronisation per tensor.
//   - The return value is nullptr when the work was enqueued, or a static message (an argument
//     error or cudaGetErrorString of the launch) that the caller turns into a Status.
//
// Only float32 input is taken: the CPU codecs convert other dtypes to float32 first, and the
// payload's dtype byte then records float32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tidegate::cuda {

// fp16 / bf16: one binary16 / bfloat16 per element, round to nearest even (collectives/half.h).
const char* launch_fp16_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                               void* stream);
const char* launch_bf16_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                               void* stream);

// signsgd: one bit per element, x < 0, LSB-first (compress/bitpack.h), voters = 1.
const char* launch_signsgd_encode(uint8_t* out, const float* in, int64_t n, int64_t* bad_index,
                                  void* stream);

// efsign: sign bits plus the scale mean(|x|), summed per 4096-element block in lane order and
// then over blocks in block order (efsign.cc). workspace: efsign_workspace_bytes(n) bytes of
// device memory for the per-block sums.
size_t efsign_workspace_bytes(int64_t n);
const char* launch_efsign_encode(uint8_t* out, const float* in, int64_t n, void* workspace,
                                 int64_t* bad_index, void* stream);

// The bucketed quantisers (compress/bucketed_codec.h layout). bucket: a multiple of 8 from 8 to
// 2^24, as the CPU spec parser accepts. One group of four threads quantises one bucket, so
// throughput wants many buckets (the default 512 gives 2 Mi of them per GiB of floats).
const char* launch_onebit_encode(uint8_t* out, const float* in, int64_t n, int64_t bucket,
                                 int64_t* bad_index, void* stream);
// maxmin: bits 1..8; stochastic rounding draws from the counter-based stream of
// compress/stochastic.h (element i uses mix32(uint32(i) ^ stream_key(seed, i >> 32))), so the
// stochastic payload is byte-identical to the CPU's for the same seed, not merely equal in
// distribution. seed is ignored for nearest rounding.
const char* launch_maxmin_encode(uint8_t* out, const float* in, int64_t n, unsigned bits,
                                 int64_t bucket, bool stochastic, uint64_t seed, int64_t* bad_index,
                                 void* stream);
// qsgd: bits 2, 4 or 8; byte-identical to the CPU for the same seed.
const char* launch_qsgd_encode(uint8_t* out, const float* in, int64_t n, unsigned bits,
                               int64_t bucket, uint64_t seed, int64_t* bad_index, void* stream);
// terngrad: 2-bit codes, scale max |x|; byte-identical to the CPU for the same seed.
const char* launch_terngrad_encode(uint8_t* out, const float* in, int64_t n, int64_t bucket,
                                   uint64_t seed, int64_t* bad_index, void* stream);

}  // namespace tidegate::cuda
