// Native collectives of the MPI transport, one gtest process per rank under mpirun: the paths
// the full-stack checks (tests/multirank/native_check_mpi.cc) cannot reach at test sizes,
// by shrinking the per-call element limit (allreduce chunks, allgather block types, the
// reduce_scatter refusal), plus capabilities, header mismatch and abort.
#include <mpi.h>

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "mpi_test_world.h"

namespace tidegate::mpi {
namespace {

MpiTransportOptions with_native_limit(int64_t native_max_elements) {
  MpiTransportOptions options;
  options.native_max_elements = native_max_elements;
  return options;
}

WireHeader header_for(OpKind kind, int64_t count, tidegate_dtype_t dtype, uint64_t seq = 0) {
  WireHeader h;
  h.op_kind = kind;
  h.op_seq = seq;
  h.count = count;
  h.dtype = static_cast<uint8_t>(dtype);
  return h;
}

// Posts one native op and drives progress until it finished (10 s at most).
Status run_native(Transport& t, const WireHeader& header, const NativeCollectiveArgs& args) {
  Transport::Handle h = 0;
  TG_RETURN_IF_ERROR(t.post_native(header, args, &h));
  const Deadline deadline = Deadline::after_ms(10000);
  while (!deadline.passed()) {
    bool activity = false, done = false;
    Status progress = t.progress(Milliseconds(10), &activity);
    Status st = t.test(h, &done);
    if (done || !st.is_ok()) return st;
    if (!progress.is_ok()) return progress;
  }
  return timeout_error("the native op did not finish within 10 s");
}

NativeCollectiveArgs args_for(NativeCollective kind, const void* in, void* out, int64_t count,
                              tidegate_dtype_t dtype, tidegate_reduce_op_t op = TIDEGATE_SUM) {
  NativeCollectiveArgs a;
  a.kind = kind;
  a.input = in;
  a.output = out;
  a.count = count;
  a.dtype = dtype;
  a.reduce_op = op;
  return a;
}

TEST(MpiNative, CapabilitiesTellTheTruth) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  const TransportCapabilities caps = w.transport->capabilities();
  EXPECT_TRUE(caps.native_allreduce && caps.native_allgather && caps.native_reduce_scatter);
  EXPECT_TRUE(w.transport->supports_native(NativeCollective::kAllreduce, TIDEGATE_INT32,
                                           TIDEGATE_AVG, TIDEGATE_MEMORY_HOST));
  // uint8 sums are offered exactly when this MPI wraps them as tidegate does (Open MPI 4.1's
  // vectorised path saturates): checked here with MPI itself, on its vector and scalar paths.
  bool wraps = true;
  for (int n : {4096, 3}) {
    std::vector<uint8_t> a(static_cast<size_t>(n), 128), b(static_cast<size_t>(n), 129);
    MPI_Reduce_local(a.data(), b.data(), n, MPI_UINT8_T, MPI_SUM);
    for (uint8_t v : b) wraps = wraps && v == 1;
  }
  EXPECT_EQ(w.transport->supports_native(NativeCollective::kAllreduce, TIDEGATE_UINT8, TIDEGATE_SUM,
                                         TIDEGATE_MEMORY_HOST),
            wraps);
  EXPECT_EQ(w.transport->supports_native(NativeCollective::kAllreduce, TIDEGATE_UINT8, TIDEGATE_AVG,
                                         TIDEGATE_MEMORY_HOST),
            wraps);
  EXPECT_FALSE(w.transport->supports_native(NativeCollective::kAllreduce, TIDEGATE_FLOAT16,
                                            TIDEGATE_SUM, TIDEGATE_MEMORY_HOST));
  EXPECT_FALSE(w.transport->supports_native(NativeCollective::kReduceScatter, TIDEGATE_BFLOAT16,
                                            TIDEGATE_MAX, TIDEGATE_MEMORY_HOST));
  EXPECT_TRUE(w.transport->supports_native(NativeCollective::kAllgather, TIDEGATE_FLOAT16,
                                           TIDEGATE_SUM, TIDEGATE_MEMORY_HOST));
  EXPECT_FALSE(w.transport->supports_native(NativeCollective::kAllreduce, TIDEGATE_FLOAT32,
                                            TIDEGATE_SUM, TIDEGATE_MEMORY_CUDA));
  uint16_t x = 0;
  Transport::Handle h = 0;
  Status st = w.transport->post_native(
      header_for(OpKind::kAllreduce, 1, TIDEGATE_FLOAT16),
      args_for(NativeCollective::kAllreduce, &x, &x, 1, TIDEGATE_FLOAT16), &h);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("float16"), std::string::npos) << st.message();
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// 23 elements with at most 5 per MPI call: five Iallreduce calls, in place, and AVG divided once.
TEST(MpiNative, AllreduceIsSplitIntoCalls) {
  World w(with_native_limit(/*native_max_elements=*/5));
  ASSERT_NE(w.transport, nullptr);
  std::vector<int32_t> data(23);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i) * w.size + w.rank;
  Status st = run_native(*w.transport, header_for(OpKind::kAllreduce, 23, TIDEGATE_INT32),
                         args_for(NativeCollective::kAllreduce, data.data(), data.data(), 23,
                                  TIDEGATE_INT32, TIDEGATE_AVG));
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  const int32_t rank_sum = w.size * (w.size - 1) / 2;
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(data[i], (static_cast<int32_t>(i) * w.size * w.size + rank_sum) / w.size) << i;
  }
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// 12 and 13 elements per rank with at most 5 per call: contiguous block types of 3 and 13.
TEST(MpiNative, AllgatherAboveTheLimitUsesABlockType) {
  World w(with_native_limit(/*native_max_elements=*/5));
  ASSERT_NE(w.transport, nullptr);
  uint64_t seq = 0;
  for (int64_t count : {int64_t{12}, int64_t{13}}) {
    for (bool in_place : {false, true}) {
      std::vector<double> out(static_cast<size_t>(count * w.size), -1.0);
      std::vector<double> in(static_cast<size_t>(count));
      double* own = in_place ? out.data() + count * w.rank : in.data();
      for (int64_t i = 0; i < count; ++i) own[i] = 1000.0 * w.rank + static_cast<double>(i);
      Status st = run_native(
          *w.transport, header_for(OpKind::kAllgather, count, TIDEGATE_FLOAT64, seq++),
          args_for(NativeCollective::kAllgather, own, out.data(), count, TIDEGATE_FLOAT64));
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      for (int r = 0; r < w.size; ++r) {
        for (int64_t i = 0; i < count; ++i) {
          EXPECT_EQ(out[static_cast<size_t>(r * count + i)], 1000.0 * r + static_cast<double>(i));
        }
      }
    }
  }
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// Blocks within the limit work (in place too); above it the refusal is immediate and clear.
TEST(MpiNative, ReduceScatterAboveTheLimitIsUnsupported) {
  World w(with_native_limit(/*native_max_elements=*/5));
  ASSERT_NE(w.transport, nullptr);
  for (bool in_place : {false, true}) {
    std::vector<float> in(static_cast<size_t>(4 * w.size));
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i + static_cast<size_t>(w.rank));
    std::vector<float> out(4);
    float* dst = in_place ? in.data() : out.data();
    Status st = run_native(
        *w.transport, header_for(OpKind::kReduceScatter, 4 * w.size, TIDEGATE_FLOAT32, in_place),
        args_for(NativeCollective::kReduceScatter, in.data(), dst, 4, TIDEGATE_FLOAT32,
                 TIDEGATE_SUM));
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(dst[i], static_cast<float>(w.size * (4 * w.rank + i) + w.size * (w.size - 1) / 2))
          << i;
    }
  }
  std::vector<float> big(static_cast<size_t>(6 * w.size)), block(6);
  Transport::Handle h = 0;
  Status st = w.transport->post_native(
      header_for(OpKind::kReduceScatter, 6 * w.size, TIDEGATE_FLOAT32, 2),
      args_for(NativeCollective::kReduceScatter, big.data(), block.data(), 6, TIDEGATE_FLOAT32),
      &h);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("reduce_scatter=ring"), std::string::npos) << st.message();
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// Rank 1 posts another dtype: every rank fails with the same MISMATCH, and the collective
// communicator stays in step (the next op works).
TEST(MpiNative, HeaderMismatchFailsEveryRankAlike) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  if (w.size < 2) GTEST_SKIP() << "needs two ranks";
  const tidegate_dtype_t dtype = w.rank == 1 ? TIDEGATE_INT32 : TIDEGATE_FLOAT32;
  std::vector<float> data(8, 1.0f);
  Status st =
      run_native(*w.transport, header_for(OpKind::kAllreduce, 8, dtype),
                 args_for(NativeCollective::kAllreduce, data.data(), data.data(), 8, dtype));
  EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH) << st.to_string();
  EXPECT_NE(st.message().find("field 'dtype'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1 posted dtype=int32"), std::string::npos) << st.message();
  EXPECT_EQ(data[0], 1.0f);  // no data moved
  st = run_native(
      *w.transport, header_for(OpKind::kAllreduce, 8, TIDEGATE_FLOAT32, 1),
      args_for(NativeCollective::kAllreduce, data.data(), data.data(), 8, TIDEGATE_FLOAT32));
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(data[0], static_cast<float>(w.size));
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// Only rank 0 posts; its abort() fails the pending op at once, and the peers learn of it.
// Last test: rank 0's header exchange can never complete and is left to MPI.
TEST(MpiNative, AbortFailsAPendingOp) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  if (w.size < 2) GTEST_SKIP() << "needs two ranks";
  if (w.rank == 0) {
    std::vector<float> data(8, 1.0f);
    Transport::Handle h = 0;
    ASSERT_TRUE(w.transport
                    ->post_native(header_for(OpKind::kAllreduce, 8, TIDEGATE_FLOAT32),
                                  args_for(NativeCollective::kAllreduce, data.data(), data.data(),
                                           8, TIDEGATE_FLOAT32),
                                  &h)
                    .is_ok());
    w.transport->abort(aborted_error("rank 0 gives up"));
    bool done = false;
    Status st = w.transport->test(h, &done);
    EXPECT_TRUE(done);
    EXPECT_EQ(st.code(), TIDEGATE_ERR_ABORTED) << st.to_string();
  } else {
    const Deadline deadline = Deadline::after_ms(10000);
    Status st;
    while (st.is_ok() && !deadline.passed()) {
      bool activity = false;
      st = w.transport->progress(Milliseconds(10), &activity);
    }
    EXPECT_EQ(st.code(), TIDEGATE_ERR_ABORTED) << st.to_string();
  }
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(2000)).is_ok());
}

}  // namespace
}  // namespace tidegate::mpi

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
