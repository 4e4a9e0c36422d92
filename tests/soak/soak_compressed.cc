#include "soak_compressed.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace tidegate::soak {
namespace {

struct CodecCase {
  const char* spec;
  const char* algorithms[3];  // nullptr-terminated; nullptr first = the codec's default only
  const char* allowed;        // codec "auto" only
  bool sums;                  // its output is a sum (false: signsgd's vote)
};

constexpr CodecCase kCodecs[] = {
    {"fp16", {"sra", "allgather", nullptr}, nullptr, true},
    {"bf16", {"sra", nullptr}, nullptr, true},
    {"qsgd:bits=4,bucket=512", {"sra", "allgather", nullptr}, nullptr, true},
    {"maxmin:bits=8,bucket=256,rounding=nearest", {"sra", nullptr}, nullptr, true},
    {"terngrad", {"sra", nullptr}, nullptr, true},
    {"onebit", {"sra", "allgather", nullptr}, nullptr, true},
    {"efsign", {"sra", nullptr}, nullptr, true},
    {"topk:ratio=0.01", {"allgather", "sparse_reduce_scatter", nullptr}, nullptr, true},
    {"randomk:ratio=0.05", {"shared_randomk", "sparse_reduce_scatter", "allgather"}, nullptr, true},
    {"threshold:value=0.5", {"allgather", "sparse_reduce_scatter", nullptr}, nullptr, true},
    {"powersgd:rank=2", {nullptr}, nullptr, true},
    {"signsgd", {nullptr}, nullptr, false},
    {"auto", {nullptr}, "fp16,topk:ratio=0.01,qsgd:bits=4", true},
};
// Element counts: odd and tiny ones (fewer elements than ranks, k rounding to 0 or 1), blocks
// that do not divide evenly, and up to 4 MiB. The key is (codec, size), so each key keeps one
// count (PowerSGD's Q and the step counters live per key).
constexpr int64_t kCounts[] = {1, 3, 1000, 4099, 65536, int64_t{1} << 20};

// Rank r's input of op `op_index`: mixed magnitudes (2^-9 to 1.5 * 2^3), both signs, some zeros,
// different on every rank and op, and the same wherever it is computed.
float input(uint64_t op_index, int rank, int64_t i) {
  uint64_t z = op_index * 0x9E3779B97F4A7C15ull ^ (uint64_t(rank) << 48) ^ uint64_t(i);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  if (z % 16 == 0) return 0.0f;
  const float mantissa = static_cast<float>((z >> 11) & 0xFFFFF) / float(1 << 20) + 0.5f;
  const int exponent = static_cast<int>((z >> 40) % 12) - 8;
  return std::ldexp((z >> 63) ? -mantissa : mantissa, exponent);
}

constexpr double kLargestInput = 12.0;

uint64_t hash_bytes(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The same bits on every rank: the hashes of all ranks, allgathered, must agree.
void check_identical(SoakRank& r, const std::vector<float>& out, const std::string& what) {
  uint64_t mine = hash_bytes(out.data(), out.size() * sizeof(float));
  std::vector<uint64_t> all(static_cast<size_t>(r.size));
  tidegate_tensor_t ti = tidegate_host_tensor(&mine, 1, TIDEGATE_INT64);
  tidegate_tensor_t to = tidegate_host_tensor(all.data(), r.size, TIDEGATE_INT64);
  if (const tidegate_status_t st = tidegate_allgather(r.comm, &ti, &to); st != TIDEGATE_OK) {
    return report_failure(r, "hash allgather after " + what, st);
  }
  for (uint64_t h : all) {
    if (h != all[0]) return report_wrong(r, what + ": the ranks' outputs differ");
  }
}

// Output plus the flushed residuals against the exact sum (in double) of every rank's input.
void check_nothing_lost(SoakRank& r, uint64_t op_index, uint64_t key, const std::vector<float>& out,
                        const std::string& what) {
  const int64_t n = static_cast<int64_t>(out.size());
  std::vector<float> residuals(out.size(), 0.0f);
  tidegate_tensor_t t = tidegate_host_tensor(residuals.data(), n, TIDEGATE_FLOAT32);
  if (const tidegate_status_t st = tidegate_ef_flush(r.comm, key, &t, TIDEGATE_SUM);
      st != TIDEGATE_OK) {
    return report_failure(r, "ef_flush after " + what, st);
  }
  if (const tidegate_status_t st = tidegate_allreduce(r.comm, &t, &t, TIDEGATE_SUM);
      st != TIDEGATE_OK) {
    return report_failure(r, "residual allreduce after " + what, st);
  }
  for (int64_t i = 0; i < n; ++i) {
    double exact = 0.0, magnitude = 0.0;
    for (int q = 0; q < r.size; ++q) {
      const double x = input(op_index, q, i);
      exact += x;
      magnitude += std::fabs(x);
    }
    const double got = static_cast<double>(out[i]) + static_cast<double>(residuals[i]);
    // float32 rounding of the encode, the sums in float32 and the residual updates: a few ulps
    // of the magnitudes involved. These include values that cancel and show in neither the
    // inputs nor the result: a quantiser's scale is its bucket's largest input, so two ranks'
    // +scale and -scale sum to 0 while their residuals x - scale and y + scale round at the
    // scale's ulp. Every input this soak makes is at least 2^-9 or 0, far above the bound, so
    // a lost or doubled input still shows.
    const double bound = 1e-5 * (magnitude + std::fabs(out[i]) + std::fabs(residuals[i])) +
                         8.0 * r.size * kLargestInput * 0x1.0p-24;
    if (!(std::fabs(got - exact) <= bound)) {
      return report_wrong(r, what + ": element " + std::to_string(i) + " output " +
                                 std::to_string(out[i]) + " + residuals " +
                                 std::to_string(residuals[i]) + " != exact sum " +
                                 std::to_string(exact));
    }
  }
}

}  // namespace

void run_compressed(SoakRank& r, std::mt19937_64& draw) {
  const size_t codec_index = draw() % std::size(kCodecs);
  const CodecCase& c = kCodecs[codec_index];
  const size_t count_index = draw() % std::size(kCounts);
  const int64_t n = kCounts[count_index];
  size_t algorithms = 0;
  while (algorithms < std::size(c.algorithms) && c.algorithms[algorithms] != nullptr) ++algorithms;
  const char* algorithm = algorithms == 0 ? nullptr : c.algorithms[draw() % algorithms];
  const uint64_t op_index = draw();

  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = input(op_index, r.rank, i);
  tidegate_compression_t compression{};
  compression.codec = c.spec;
  compression.key = 1 + codec_index * std::size(kCounts) + count_index;
  compression.error_feedback = 1;
  compression.algorithm = algorithm;
  compression.allowed = c.allowed;
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), n, TIDEGATE_FLOAT32);
  const std::string what = std::string("compressed allreduce ") + c.spec + " (" +
                           (algorithm ? algorithm : "default") + ") of " + std::to_string(n);
  if (const tidegate_status_t st =
          tidegate_compressed_allreduce(r.comm, &t, &t, TIDEGATE_SUM, &compression);
      st != TIDEGATE_OK) {
    return report_failure(r, what, st);
  }
  check_identical(r, data, what);
  if (c.sums) {
    check_nothing_lost(r, op_index, compression.key, data, what);
  } else {
    // A majority vote is not a sum: only finiteness is checked, and the residuals are
    // released like the others'.
    for (float v : data) {
      if (!std::isfinite(v)) return report_wrong(r, what + ": a non-finite output");
    }
    std::vector<float> residuals(data.size(), 0.0f);
    tidegate_tensor_t rt = tidegate_host_tensor(residuals.data(), n, TIDEGATE_FLOAT32);
    if (const tidegate_status_t st = tidegate_ef_flush(r.comm, compression.key, &rt, TIDEGATE_SUM);
        st != TIDEGATE_OK) {
      report_failure(r, "ef_flush after " + what, st);
    }
  }
}

}  // namespace tidegate::soak
