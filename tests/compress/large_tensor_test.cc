// Tensors beyond 2^31 elements. One real encode/decode of 2^31 + 1000 bfloat16 elements (4 GiB,
// a few seconds; skipped when the machine has less than 12 GiB available or under ASan), and
// the 64-bit index arithmetic of the random streams checked directly at 2^32 boundaries, where
// a real tensor would need 16 GiB.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <fstream>
#include <string>

#include "compress/stochastic.h"
#include "numeric/half.h"
#include "quantiser_reference.h"

namespace tidegate {
namespace {

using namespace qtest;

int64_t available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// An anonymous mapping: untouched parts read as zeros (the shared zero page) without being
// allocated or cleared, which saves most of a 4 GiB vector's set-up time. (Asking for huge
// pages made it slower: the kernel compacts memory synchronously to find them.)
template <typename T>
struct HugeBuffer {
  explicit HugeBuffer(size_t n) : size(n * sizeof(T)) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    data = static_cast<T*>(p);
  }
  ~HugeBuffer() {
    if (data != nullptr) munmap(data, size);
  }
  size_t size;
  T* data = nullptr;
};

TEST(LargeTensor, BucketedCodecBeyondTwoToTheThirtyOne) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "4 GiB tensor: not under AddressSanitizer";
#endif
  if (available_bytes() < (int64_t{12} << 30)) GTEST_SKIP() << "needs 12 GiB of available memory";
  const int64_t bucket = 4096;
  const int64_t n = (int64_t{1} << 31) + 1000;
  const int64_t tail = (n / bucket - 2) * bucket;  // the last two full buckets and the short one
  HugeBuffer<uint16_t> input(static_cast<size_t>(n));
  ASSERT_NE(input.data, nullptr);
  uint16_t* x = input.data;  // zeros, except:
  std::vector<float> tail_values;
  for (int64_t i = tail; i < n; ++i) {
    x[i] = float_to_bf16(static_cast<float>(i % 1001) * 1e-3f - 0.5f);
    tail_values.push_back(bf16_to_float(x[i]));
  }
  x[5] = float_to_bf16(-2.0f);  // the first bucket is not all zero either
  auto codec = make("maxmin:bits=2,bucket=4096,rounding=nearest");
  TensorView view;
  view.data = x;
  view.count = n;
  view.dtype = TIDEGATE_BFLOAT16;
  HugeBuffer<uint8_t> payload_buffer(codec->max_payload_bytes(view));
  ASSERT_NE(payload_buffer.data, nullptr);
  struct {
    uint8_t* p;
    size_t n;
    uint8_t* data() { return p; }
    size_t size() const { return n; }
  } payload{payload_buffer.data, payload_buffer.size};
  ASSERT_EQ(payload.size(),
            24 + static_cast<size_t>((n + bucket - 1) / bucket) * 8 + static_cast<size_t>(n) / 4);
  size_t written = 0;
  EncodeContext context;
  context.threads = 2;
  ASSERT_TRUE(codec->encode(view, context, payload.data(), payload.size(), &written).is_ok());
  ASSERT_EQ(written, payload.size());
  // The tail's scales and codes equal the reference encoding of the tail alone (nearest
  // rounding does not depend on the element index).
  const auto ref = ref_maxmin(tail_values, 2, bucket, false, 0);
  const size_t tail_buckets = 3, ref_scales = 24,
               scales_at = 24 + static_cast<size_t>(tail / bucket) * 8;
  ASSERT_EQ(0, std::memcmp(payload.data() + scales_at, ref.data() + ref_scales, tail_buckets * 8));
  const size_t codes_at =
      24 + static_cast<size_t>((n + bucket - 1) / bucket) * 8 + static_cast<size_t>(tail) / 4;
  ASSERT_EQ(0, std::memcmp(payload.data() + codes_at, ref.data() + ref_scales + tail_buckets * 8,
                           ref.size() - ref_scales - tail_buckets * 8));
  ASSERT_TRUE(codec->decode(payload.data(), payload.size(), view).is_ok());
  const auto ref_decoded = decode(*codec, ref, static_cast<int64_t>(tail_values.size()));
  for (int64_t i = tail; i < n; ++i) {
    ASSERT_EQ(x[i], float_to_bf16(ref_decoded[static_cast<size_t>(i - tail)])) << i;
  }
  EXPECT_EQ(bf16_to_float(x[5]), -2.0f);
}

TEST(LargeTensor, CounterRunsNeverCrossTwoToTheThirtyTwo) {
  const uint64_t boundary = uint64_t{1} << 32;
  EXPECT_EQ(counter_run_length(boundary - 16, 1024, 1024), 16);
  EXPECT_EQ(counter_run_length(boundary, 1024, 1024), 1024);
  EXPECT_EQ(counter_run_length(3 * boundary - 1, 5, 1024), 1);
  EXPECT_EQ(counter_run_length(7, 5, 1024), 5);
  // Pieces from for_each_counter_segment reproduce the reference value of every element.
  std::vector<uint64_t> firsts = {boundary - 24, 5 * boundary - 3, 12345};
  for (uint64_t first : firsts) {
    for_each_counter_segment(
        99, first, 40, [&](int64_t offset, int64_t n, uint32_t counter, uint32_t key) {
          for (int64_t j = 0; j < n; ++j) {
            const uint64_t i = first + static_cast<uint64_t>(offset + j);
            EXPECT_EQ(uniform01(mix32((counter + static_cast<uint32_t>(j)) ^ key)),
                      ref_uniform(99, i))
                << i;
          }
        });
  }
  EXPECT_NE(stream_key(99, 0), stream_key(99, 1));
  EXPECT_NE(stream_key(99, 0), stream_key(100, 0));
}

}  // namespace
}  // namespace tidegate
