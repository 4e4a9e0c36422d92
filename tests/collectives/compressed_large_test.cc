// A compressed allreduce of more than 2^31 elements (bfloat16, 4 GiB per rank, two ranks as
// threads over loopback): scatter-reduce-allgather's blocks, segments and payload offsets in
// 64-bit arithmetic. Checked: identical on both ranks, and elements on either side of 2^31 (and
// the last one) within 4-bit qsgd's error of the exact sum. Run alone (RUN_SERIAL): it needs
// about 12 GiB.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/compressed/compression_state.h"
#include "compressed_reference.h"
#include "test_cases.h"

namespace tidegate::testing {
namespace {

constexpr int64_t kCount = (int64_t{1} << 31) + 7;

// bfloat16 of a value that depends on the element and the rank (0.5 .. 1.5, sign alternating).
uint16_t value_bits(int rank, int64_t i) {
  const float v = (i % 2 == 0 ? 1.0f : -1.0f) * (0.5f + static_cast<float>((i + rank) % 5) * 0.25f);
  return ref_float_to_bf16(v);
}

TEST(CompressedLarge, SraBeyondTwoToThe31Elements) {
  std::vector<std::vector<uint16_t>> data(2, std::vector<uint16_t>(static_cast<size_t>(kCount)));
  // value_bits repeats every 10 elements: one period written, then copied in doubling spans
  // (an element-by-element fill of 2 x 2^31 took longer than the collective).
  for (int r = 0; r < 2; ++r) {
    uint16_t* d = data[r].data();
    for (int64_t i = 0; i < 10; ++i) d[i] = value_bits(r, i);
    for (int64_t filled = 10; filled < kCount; filled *= 2) {
      std::memcpy(d + filled, d, static_cast<size_t>(std::min(filled, kCount - filled)) * 2);
    }
  }
  std::unique_ptr<Codec> made;
  ASSERT_TRUE(make_codec("qsgd:bits=8,bucket=512", &made).is_ok());
  std::shared_ptr<const Codec> codec(std::move(made));
  std::vector<CompressionState> states(2);
  const std::vector<Status> results = run_ranks(2, Config(), [&](const TaskContext& base) {
    TaskContext context = base;
    context.compression = &states[base.rank];
    CollectiveArgs args;
    args.kind = OpKind::kAllreduce;
    args.reduce_op = TIDEGATE_SUM;
    args.input = args.output = view(data[base.rank].data(), kCount, TIDEGATE_BFLOAT16);
    args.compression.codec = codec;
    args.compression.key = 1;
    args.compression.algorithm = "sra";
    return run_collective(context, args, Deadline::after_ms(600000));
  });
  for (const Status& st : results) ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(std::memcmp(data[0].data(), data[1].data(), data[0].size() * sizeof(uint16_t)), 0);
  for (int64_t i : {int64_t{0}, int64_t{5}, (int64_t{1} << 31) - 3, int64_t{1} << 31,
                    (int64_t{1} << 31) + 2, kCount - 1}) {
    const double exact = static_cast<double>(ref_bf16_to_float(value_bits(0, i))) +
                         ref_bf16_to_float(value_bits(1, i));
    const double got = ref_bf16_to_float(data[0][static_cast<size_t>(i)]);
    // 8-bit qsgd: each of the two quantisations errs by at most the bucket norm / 127, and the
    // bucket norm of 512 values below 3 is below 3 sqrt(512) ~ 68: a loose 1.5 + bf16 rounding.
    EXPECT_NEAR(got, exact, 1.5) << "element " << i;
    EXPECT_EQ(got < 0, exact < 0) << "element " << i;
  }
}

}  // namespace
}  // namespace tidegate::testing
