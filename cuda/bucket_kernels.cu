// The bucketed quantisers (compress/bucketed_codec.h payload): onebit, maxmin, qsgd, terngrad.
// One kernel template, one policy per codec. Four threads own a bucket; thread q loads elements
// 4q..4q+3 of every 16 as one float4, so lane l = 4q + j sees exactly the elements i with
// i % 16 == l, in index order - the lane rule of compress/lane_reduce.h. Pass 1 accumulates
// per lane; the 16 lanes are combined in lane order through shuffles (each of the four threads
// computes the same combination, so no broadcast is needed); pass 2 re-reads the bucket (from
// L1/L2 for the default 512-element bucket) and writes the codes.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device_common.cuh"
#include "cuda/launch.h"

namespace tidegate::cuda {

namespace {

using detail::kThreads;

struct Settings {
  unsigned bits = 8;
  int top = 0;  // maxmin: 2^bits - 1; qsgd: 2^(bits-1) - 1 levels; terngrad: 1
  bool stochastic = false;
  uint64_t seed = 0;
};

// The random key of element index i of a bucket starting at `first` (a bucket of at most 2^24
// elements crosses at most one 2^32 boundary; a group of four never crosses one).
struct Keys {
  uint64_t segment;
  uint32_t low, high;
  __device__ __forceinline__ uint32_t of(int64_t i) const {
    return (static_cast<uint64_t>(i) >> 32) == segment ? low : high;
  }
};

// compress/sign_magnitude.h: code = level | (x < 0) << (bits - 1), level from t = |x| * (L/norm).
struct SignMagnitude {
  float norm, ratio, top;
  bool use_ratio;
  unsigned bits;
  // Members are set in the bodies: nvcc's host pass keeps mem-initialisers of __device__
  // constructors and rejects device intrinsics there.
  __device__ __forceinline__ SignMagnitude(float scale, const Settings& s) {
    norm = scale;
    top = static_cast<float>(s.top);
    bits = s.bits;
    ratio = __fdiv_rn(top, norm);
    use_ratio = isfinite(ratio);
  }
  __device__ __forceinline__ uint32_t code(float x, uint32_t counter, uint32_t key) const {
    if (norm == 0.0f) return 0;
    const float magnitude = fabsf(x);
    const float t =
        use_ratio ? __fmul_rn(magnitude, ratio) : __fmul_rn(__fdiv_rn(magnitude, norm), top);
    float s = __fadd_rn(t, detail::uniform01(counter, key));
    s = s < top ? s : top;
    return static_cast<uint32_t>(__float2int_rz(s)) | ((x < 0.0f ? 1u : 0u) << (bits - 1));
  }
};

// qsgd: scale = float(sqrt(double sum of squares in lane order)).
struct QsgdPolicy {
  static constexpr int kScales = 1;
  struct Lane {
    double squares = 0.0;
    __device__ __forceinline__ void add(float x) {
      const double d = x;
      squares = __dadd_rn(squares, __dmul_rn(d, d));  // d * d is exact in double
    }
  };
  struct Bucket {
    double squares = 0.0;
    __device__ __forceinline__ void add(const Lane& l) { squares = __dadd_rn(squares, l.squares); }
  };
  __device__ static Lane shuffle(unsigned mask, const Lane& l, int source) {
    return Lane{__shfl_sync(mask, l.squares, source, 4)};
  }
  float norm;
  SignMagnitude quantiser;
  bool ok;
  __device__ QsgdPolicy(const Bucket& b, int64_t, const Settings& s)
      : norm(sqrt_to_float(b.squares)), quantiser(norm, s) {
    constexpr float kMaxNorm = 0x1p127f;  // qsgd.cc: level * (norm / s) must stay finite
    ok = b.squares < static_cast<double>(kMaxNorm) * kMaxNorm && norm < kMaxNorm;
  }
  __device__ static float sqrt_to_float(double squares) {
    return __double2float_rn(__dsqrt_rn(squares));
  }
  __device__ void scales(float* out) const { out[0] = norm; }
  __device__ __forceinline__ uint32_t code(float x, uint32_t counter, uint32_t key) const {
    return quantiser.code(x, counter, key);
  }
};

// terngrad: scale = max |x| as an integer maximum of the bit patterns (NaN above infinity).
struct TernGradPolicy {
  static constexpr int kScales = 1;
  struct Lane {
    uint32_t max_bits = 0;
    __device__ __forceinline__ void add(float x) {
      max_bits = max(max_bits, __float_as_uint(x) & 0x7fffffffu);
    }
  };
  struct Bucket {
    uint32_t max_bits = 0;
    __device__ __forceinline__ void add(const Lane& l) { max_bits = max(max_bits, l.max_bits); }
  };
  __device__ static Lane shuffle(unsigned mask, const Lane& l, int source) {
    return Lane{__shfl_sync(mask, l.max_bits, source, 4)};
  }
  SignMagnitude quantiser;
  float scale;
  bool ok;
  __device__ TernGradPolicy(const Bucket& b, int64_t, const Settings& s)
      : quantiser(as_float(b.max_bits), s), scale(as_float(b.max_bits)), ok(isfinite(scale)) {}
  __device__ static float as_float(uint32_t bits) { return __uint_as_float(bits); }
  __device__ void scales(float* out) const { out[0] = scale; }
  __device__ __forceinline__ uint32_t code(float x, uint32_t counter, uint32_t key) const {
    return quantiser.code(x, counter, key);
  }
};

// maxmin: lo, hi (exact whatever the order; zeros returned as +0), codes on lo + c * step.
struct MaxMinPolicy {
  static constexpr int kScales = 2;
  struct Lane {
    float lo = __builtin_huge_valf(), hi = -__builtin_huge_valf();  // neutral: the result is exact
    bool nonfinite = false;
    __device__ __forceinline__ void add(float x) {
      lo = x < lo ? x : lo;
      hi = x > hi ? x : hi;
      nonfinite |= detail::is_nonfinite(x);
    }
  };
  struct Bucket : Lane {
    __device__ __forceinline__ void add(const Lane& l) {
      lo = l.lo < lo ? l.lo : lo;
      hi = l.hi > hi ? l.hi : hi;
      nonfinite |= l.nonfinite;
    }
  };
  __device__ static Lane shuffle(unsigned mask, const Lane& l, int source) {
    Lane r;
    r.lo = __shfl_sync(mask, l.lo, source, 4);
    r.hi = __shfl_sync(mask, l.hi, source, 4);
    r.nonfinite = __shfl_sync(mask, l.nonfinite ? 1 : 0, source, 4) != 0;
    return r;
  }
  float lo, hi, range, inverse, top;
  bool use_inverse, stochastic, ok;
  __device__ MaxMinPolicy(const Bucket& b, int64_t, const Settings& s) {
    lo = __fadd_rn(b.lo, 0.0f);  // -0 + +0 = +0: the zero seen first does not matter
    hi = __fadd_rn(b.hi, 0.0f);
    top = static_cast<float>(s.top);
    stochastic = s.stochastic;
    range = __fsub_rn(hi, lo);
    ok = !b.nonfinite && isfinite(range);
    inverse = __fdiv_rn(top, range);
    use_inverse = isfinite(inverse);
  }
  __device__ void scales(float* out) const { out[0] = lo, out[1] = hi; }
  __device__ __forceinline__ uint32_t code(float x, uint32_t counter, uint32_t key) const {
    if (range == 0.0f) return 0;
    const float d = __fsub_rn(x, lo);
    const float t = use_inverse ? __fmul_rn(d, inverse) : __fmul_rn(__fdiv_rn(d, range), top);
    float s = __fadd_rn(t, stochastic ? detail::uniform01(counter, key) : 0.5f);
    s = s < top ? s : top;
    return static_cast<uint32_t>(__float2int_rz(s));
  }
};

// onebit: means of the non-negative and of the negative elements (double sums in lane order).
struct OneBitPolicy {
  static constexpr int kScales = 2;
  struct Lane {
    double positive = 0.0, negative = 0.0;
    int64_t negatives = 0;
    __device__ __forceinline__ void add(float x) {
      if (x < 0.0f) {
        negative = __dadd_rn(negative, static_cast<double>(x));
        ++negatives;
      } else {
        positive = __dadd_rn(positive, static_cast<double>(x));  // NaN lands here, as on the CPU
      }
    }
  };
  struct Bucket : Lane {
    __device__ __forceinline__ void add(const Lane& l) {
      positive = __dadd_rn(positive, l.positive);
      negative = __dadd_rn(negative, l.negative);
      negatives += l.negatives;
    }
  };
  __device__ static Lane shuffle(unsigned mask, const Lane& l, int source) {
    Lane r;
    r.positive = __shfl_sync(mask, l.positive, source, 4);
    r.negative = __shfl_sync(mask, l.negative, source, 4);
    r.negatives = __shfl_sync(mask, static_cast<long long>(l.negatives), source, 4);
    return r;
  }
  float means[2];
  bool ok;
  __device__ OneBitPolicy(const Bucket& b, int64_t m, const Settings&) {
    ok = isfinite(b.positive) && isfinite(b.negative);
    means[0] = b.negatives < m
                   ? __double2float_rn(__ddiv_rn(b.positive, __ll2double_rn(m - b.negatives)))
                   : 0.0f;
    means[1] = b.negatives > 0
                   ? __double2float_rn(__ddiv_rn(b.negative, __ll2double_rn(b.negatives)))
                   : 0.0f;
  }
  __device__ void scales(float* out) const { out[0] = means[0], out[1] = means[1]; }
  __device__ __forceinline__ uint32_t code(float x, uint32_t, uint32_t) const {
    return x < 0.0f ? 1u : 0u;
  }
};

// Loads elements e..e+3 (e a multiple of 4) and how many of them lie before `end`.
__device__ __forceinline__ int load4(const float* __restrict__ in, int64_t e, int64_t end,
                                     float x[4]) {
  if (e + 4 <= end) {
    const float4 v = *reinterpret_cast<const float4*>(in + e);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    return 4;
  }
  int valid = 0;
  for (int j = 0; j < 4; ++j) {
    x[j] = e + j < end ? in[e + j] : 0.0f;
    valid += e + j < end ? 1 : 0;
  }
  return valid;
}

// Writes the 2 * bits bytes of a 16-element group whose codes start at byte `at` of codes,
// from the four threads' 4 * bits-bit values; bytes at or beyond `limit` belong to the next
// bucket or lie past the payload and are skipped. Even widths on a whole group: each thread
// stores its own bits / 2 bytes (aligned: the codes start 4-byte aligned, groups at multiples
// of 8 elements). Otherwise thread 0 gathers the group and stores it byte by byte.
__device__ __forceinline__ void store_group(uint8_t* codes, int64_t at, int64_t limit,
                                            uint32_t value, unsigned bits, int q, unsigned mask) {
  if (bits % 2 == 0 && bits != 6 && at + 2 * static_cast<int64_t>(bits) <= limit) {
    uint8_t* p = codes + at + bits * q / 2;
    if (bits == 8)
      *reinterpret_cast<uint32_t*>(p) = value;
    else if (bits == 4)
      *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(value);
    else
      *p = static_cast<uint8_t>(value);
    return;
  }
  uint64_t low = 0, high = 0;  // the group's 16 * bits <= 128 bits
  for (int source = 0; source < 4; ++source) {
    const uint64_t v = __shfl_sync(mask, value, source, 4);
    const unsigned offset = 4 * bits * source;
    if (offset < 64) {
      low |= v << offset;
      if (offset + 4 * bits > 64) high |= v >> (64 - offset);
    } else {
      high |= v << (offset - 64);
    }
  }
  if (q != 0) return;
  for (unsigned k = 0; k < 2 * bits && at + static_cast<int64_t>(k) < limit; ++k) {
    codes[at + k] = static_cast<uint8_t>(k < 8 ? low >> (8 * k) : high >> (8 * (k - 8)));
  }
}

template <typename Policy>
__global__ void __launch_bounds__(kThreads)
    bucket_kernel(uint8_t* __restrict__ out, const float* __restrict__ in, int64_t n,
                  int64_t bucket, Settings settings, PayloadPrefix prefix, int64_t* bad_index) {
  detail::write_prefix(out, prefix);
  const int64_t buckets = (n + bucket - 1) / bucket;
  float* scales = reinterpret_cast<float*>(out + 24);
  uint8_t* codes = out + 24 + buckets * Policy::kScales * sizeof(float);
  const int64_t code_bytes = (n * settings.bits + 7) / 8;
  const int q = threadIdx.x & 3;
  const unsigned mask = detail::quad_mask();
  const int64_t quads = (static_cast<int64_t>(gridDim.x) * blockDim.x) / 4;
  for (int64_t b = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 4; b < buckets;
       b += quads) {
    const int64_t first = b * bucket;
    const int64_t end = min(first + bucket, n);
    typename Policy::Lane lanes[4];
#pragma unroll 2
    for (int64_t i = first + 4 * q; i < end; i += 16) {
      float x[4];
      const int valid = load4(in, i, end, x);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j < valid) lanes[j].add(x[j]);
      }
    }
    typename Policy::Bucket total;
    for (int source = 0; source < 4; ++source) {
#pragma unroll
      for (int j = 0; j < 4; ++j) total.add(Policy::shuffle(mask, lanes[j], source));
    }
    const Policy policy(total, end - first, settings);
    if (!policy.ok) {  // the CPU names the bucket's first non-finite element, else the bucket
      int64_t bad = INT64_MAX;
      for (int64_t i = first + q; i < end; i += 4) {
        if (detail::is_nonfinite(in[i])) {
          bad = i;
          break;
        }
      }
      for (int step = 1; step < 4; step *= 2) {
        bad = min(
            bad, static_cast<int64_t>(__shfl_xor_sync(mask, static_cast<long long>(bad), step, 4)));
      }
      if (q == 0) detail::report_bad(bad_index, bad == INT64_MAX ? first : bad);
      continue;
    }
    if (q == 0) policy.scales(scales + b * Policy::kScales);
    const uint64_t segment = static_cast<uint64_t>(first) >> 32;
    const Keys keys{segment, detail::stream_key(settings.seed, segment),
                    detail::stream_key(settings.seed, segment + 1)};
    // Bytes past the bucket's own codes belong to the next bucket (or lie past the payload).
    const int64_t limit = end == n ? code_bytes : end * settings.bits / 8;
    for (int64_t g = first; g < end; g += 16) {
      float x[4];
      const int64_t e = g + 4 * q;
      const int valid = load4(in, e, end, x);
      const uint32_t key = keys.of(e);
      uint32_t value = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t c = j < valid ? policy.code(x[j], static_cast<uint32_t>(e + j), key) : 0u;
        value |= c << (settings.bits * j);
      }
      store_group(codes, g * settings.bits / 8, limit, value, settings.bits, q, mask);
    }
  }
}

template <typename Policy>
const char* launch_bucketed(uint8_t codec, uint8_t variant, unsigned scales, uint8_t* out,
                            const float* in, int64_t n, int64_t bucket, const Settings& settings,
                            int64_t* bad_index, void* stream) {
  if (const char* error = detail::check_common(out, in, n, bad_index)) return error;
  if (bucket < 8 || bucket > (int64_t{1} << 24) || bucket % 8 != 0) {
    return "tidegate cuda encode: bucket must be a multiple of 8 from 8 to 16777216";
  }
  if (const char* error = detail::reset_bad_index(bad_index, stream)) return error;
  // bucketed_codec.h parameters: u8 bits | u8 variant | u16 scales per bucket | u32 bucket.
  const uint32_t bucket32 = static_cast<uint32_t>(bucket);
  const uint8_t params[8] = {
      static_cast<uint8_t>(settings.bits),  variant,
      static_cast<uint8_t>(scales),         0,
      static_cast<uint8_t>(bucket32),       static_cast<uint8_t>(bucket32 >> 8),
      static_cast<uint8_t>(bucket32 >> 16), static_cast<uint8_t>(bucket32 >> 24)};
  const PayloadPrefix prefix = payload_prefix(codec, n, params, sizeof params);
  const int64_t buckets = (n + bucket - 1) / bucket;
  bucket_kernel<Policy>
      <<<detail::grid_for(buckets, kThreads / 4), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          out, in, n, bucket, settings, prefix, bad_index);
  return detail::launch_status();
}

}  // namespace

const char* launch_onebit_encode(uint8_t* out, const float* in, int64_t n, int64_t bucket,
                                 int64_t* bad_index, void* stream) {
  Settings s;
  s.bits = 1;
  return launch_bucketed<OneBitPolicy>(kOneBitId, 0, 2, out, in, n, bucket, s, bad_index, stream);
}

const char* launch_maxmin_encode(uint8_t* out, const float* in, int64_t n, unsigned bits,
                                 int64_t bucket, bool stochastic, uint64_t seed, int64_t* bad_index,
                                 void* stream) {
  if (bits < 1 || bits > 8) return "tidegate cuda maxmin: bits must be 1..8";
  const Settings s{bits, (1 << bits) - 1, stochastic, seed};
  return launch_bucketed<MaxMinPolicy>(kMaxMinId, stochastic ? 1 : 0, 2, out, in, n, bucket, s,
                                       bad_index, stream);
}

const char* launch_qsgd_encode(uint8_t* out, const float* in, int64_t n, unsigned bits,
                               int64_t bucket, uint64_t seed, int64_t* bad_index, void* stream) {
  if (bits != 2 && bits != 4 && bits != 8) return "tidegate cuda qsgd: bits must be 2, 4 or 8";
  const Settings s{bits, (1 << (bits - 1)) - 1, true, seed};
  return launch_bucketed<QsgdPolicy>(kQsgdId, 0, 1, out, in, n, bucket, s, bad_index, stream);
}

const char* launch_terngrad_encode(uint8_t* out, const float* in, int64_t n, int64_t bucket,
                                   uint64_t seed, int64_t* bad_index, void* stream) {
  const Settings s{2, 1, true, seed};
  return launch_bucketed<TernGradPolicy>(kTernGradId, 0, 1, out, in, n, bucket, s, bad_index,
                                         stream);
}

}  // namespace tidegate::cuda
