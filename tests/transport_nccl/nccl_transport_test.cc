// NCCL transport tests on one GPU: a one-rank communicator (created through the transport table
// and an in-memory store) sending to itself, the three native collectives, the header checks,
// abort and the refusal of host memory. Without a CUDA device every test skips with the reason.
//
// What one GPU cannot test: NCCL needs one GPU per rank, so exchanges between ranks, grouping of
// a send and a receive with another rank, a peer's failure or abort, and header mismatches
// between different ranks of a native collective all need a machine with two or more GPUs.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/transport_registry.h"
#include "base/auth.h"
#include "base/config.h"
#include "base/transport.h"
#include "bootstrap/memory_store.h"
#include "cuda/device_runtime.h"

namespace tidegate {
namespace {

constexpr uint64_t kCommId = 0x4e43434c;

// Device memory for one test, freed at scope exit.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : bytes(n) { EXPECT_EQ(cuda::device_alloc(&ptr, n), nullptr); }
  ~DeviceBuffer() {
    if (ptr != nullptr) cuda::device_free(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void put(const std::vector<float>& v) {
    EXPECT_EQ(cuda::copy_to_device(ptr, v.data(), v.size() * 4), nullptr);
  }
  std::vector<float> get(size_t n) const {
    std::vector<float> v(n);
    EXPECT_EQ(cuda::copy_to_host(v.data(), ptr, n * 4), nullptr);
    return v;
  }
  void* ptr = nullptr;
  size_t bytes = 0;
};

std::vector<float> ramp(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 1000) * 0.5f;
  return v;
}

WireHeader message_header(uint64_t op_seq, int64_t count) {
  WireHeader h;
  h.op_kind = OpKind::kAllreduce;
  h.dtype = TIDEGATE_FLOAT32;
  h.comm_id = kCommId;
  h.op_seq = op_seq;
  h.count = count;
  h.payload_bytes = static_cast<uint64_t>(count) * 4;
  h.sender_rank = 0;
  return h;
}

class NcclTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    const TransportEntry* entry = find_transport("nccl");
    ASSERT_NE(entry, nullptr) << "this build has no nccl transport";
    secret_ = Secret::from_text("nccl-test-secret");
    context_.rank = 0;
    context_.size = 1;
    context_.comm_id = kCommId;
    context_.config = &config_;
    context_.store = &store_;
    context_.secret = &secret_;
    context_.deadline = Deadline::after_ms(60000);
    const Status st = entry->create(context_, &transport_);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }

  void TearDown() override {
    if (transport_ != nullptr) {
      EXPECT_TRUE(transport_->close(Deadline::after_ms(10000)).is_ok());
    }
  }

  // Progresses until `handle` finished; its status.
  Status wait(Transport::Handle handle) {
    const Deadline deadline = Deadline::after_ms(30000);
    while (!deadline.passed()) {
      bool done = false;
      const Status st = transport_->test(handle, &done);
      if (done) return st;
      bool activity = false;
      const Status pst = transport_->progress(Milliseconds(10), &activity);
      if (!pst.is_ok()) {
        (void)transport_->test(handle, &done);  // release the handle; the transport's error wins
        return pst;
      }
    }
    return timeout_error("test wait");
  }

  Status native(NativeCollective kind, const void* in, void* out, int64_t count,
                tidegate_reduce_op_t op = TIDEGATE_SUM,
                tidegate_memory_t memory = TIDEGATE_MEMORY_CUDA) {
    NativeCollectiveArgs args;
    args.kind = kind;
    args.input = in;
    args.output = out;
    args.count = count;
    args.reduce_op = op;
    args.memory = memory;
    Transport::Handle h = 0;
    TG_RETURN_IF_ERROR(transport_->post_native(message_header(9, count), args, &h));
    return wait(h);
  }

  Config config_;
  Secret secret_;
  MemoryStore store_;
  TransportContext context_;
  std::unique_ptr<Transport> transport_;
};

TEST_F(NcclTransportTest, CapabilitiesAreDeviceOnlyWithNativeCollectives) {
  const TransportCapabilities caps = transport_->capabilities();
  EXPECT_TRUE(caps.cuda_memory);
  EXPECT_FALSE(caps.host_memory);
  EXPECT_TRUE(caps.native_allreduce && caps.native_allgather && caps.native_reduce_scatter);
  EXPECT_TRUE(transport_->supports_native(NativeCollective::kAllreduce, TIDEGATE_BFLOAT16,
                                          TIDEGATE_AVG, TIDEGATE_MEMORY_CUDA));
  EXPECT_FALSE(transport_->supports_native(NativeCollective::kAllreduce, TIDEGATE_FLOAT32,
                                           TIDEGATE_SUM, TIDEGATE_MEMORY_HOST));
}

// NCCL delivers to the same rank when the send and the receive share a group: both are posted
// before progress() runs, so they do.
TEST_F(NcclTransportTest, SendToSelfDeliversPayload) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    DeviceBuffer src(n * 4), dst(n * 4);
    const std::vector<float> values = ramp(n, 3.0f);
    src.put(values);
    Transport::Handle send = 0, recv = 0;
    ASSERT_TRUE(
        transport_->isend(0, 1, message_header(n, static_cast<int64_t>(n)), src.ptr, n * 4, &send)
            .is_ok());
    ASSERT_TRUE(
        transport_->irecv(0, 1, message_header(n, static_cast<int64_t>(n)), dst.ptr, n * 4, &recv)
            .is_ok());
    const Status rs = wait(recv);
    ASSERT_TRUE(rs.is_ok()) << rs.to_string();
    ASSERT_TRUE(wait(send).is_ok());
    EXPECT_EQ(dst.get(n), values) << n << " floats";
  }
}

TEST_F(NcclTransportTest, HeaderMismatchOnSelfSendFailsTheReceive) {
  DeviceBuffer src(400), dst(400);
  WireHeader expected = message_header(5, 100);
  expected.op_seq = 6;  // the receiver expects the next op
  Transport::Handle send = 0, recv = 0;
  ASSERT_TRUE(transport_->isend(0, 0, message_header(5, 100), src.ptr, 400, &send).is_ok());
  ASSERT_TRUE(transport_->irecv(0, 0, expected, dst.ptr, 400, &recv).is_ok());
  const Status st = wait(recv);
  EXPECT_TRUE(st.code() == TIDEGATE_ERR_MISMATCH || st.code() == TIDEGATE_ERR_PROTOCOL)
      << st.to_string();
  EXPECT_NE(st.message().find("op"), std::string::npos) << st.to_string();
  bool done = false;
  EXPECT_FALSE(transport_->test(send, &done).is_ok());  // the transport failed as a whole
}

TEST_F(NcclTransportTest, NativeAllreduceOnOneRankKeepsValues) {
  const size_t n = 4096;
  DeviceBuffer in(n * 4), out(n * 4);
  const std::vector<float> values = ramp(n, -7.0f);
  in.put(values);
  for (tidegate_reduce_op_t op : {TIDEGATE_SUM, TIDEGATE_AVG, TIDEGATE_MAX}) {
    const Status st = native(NativeCollective::kAllreduce, in.ptr, out.ptr, n, op);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(out.get(n), values) << reduce_op_name(op);
  }
  ASSERT_TRUE(native(NativeCollective::kAllreduce, in.ptr, in.ptr, n).is_ok());  // in place
  EXPECT_EQ(in.get(n), values);
}

TEST_F(NcclTransportTest, NativeAllgatherAndReduceScatterOnOneRank) {
  const size_t n = 1000;
  DeviceBuffer in(n * 4), out(n * 4);
  const std::vector<float> values = ramp(n, 1.0f);
  in.put(values);
  ASSERT_TRUE(native(NativeCollective::kAllgather, in.ptr, out.ptr, n).is_ok());
  EXPECT_EQ(out.get(n), values);
  EXPECT_EQ(cuda::device_memset(out.ptr, 0, n * 4), nullptr);
  ASSERT_TRUE(native(NativeCollective::kReduceScatter, in.ptr, out.ptr, n).is_ok());
  EXPECT_EQ(out.get(n), values);
}

TEST_F(NcclTransportTest, AbortFailsPendingTransfers) {
  DeviceBuffer dst(64);
  Transport::Handle recv = 0;  // nobody sends: it stays pending
  ASSERT_TRUE(transport_->irecv(0, 0, message_header(1, 16), dst.ptr, 64, &recv).is_ok());
  bool activity = false;
  ASSERT_TRUE(transport_->progress(Milliseconds(20), &activity).is_ok());
  transport_->abort(aborted_error("test abort"));
  bool done = false;
  const Status st = transport_->test(recv, &done);
  EXPECT_TRUE(done);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_ABORTED) << st.to_string();
  EXPECT_FALSE(transport_->isend(0, 0, message_header(2, 0), nullptr, 0, &recv).is_ok());
}

TEST_F(NcclTransportTest, HostPointersAreRejected) {
  std::vector<float> host(16, 1.0f);
  Transport::Handle h = 0;
  Status st = transport_->isend(0, 0, message_header(1, 16), host.data(), 64, &h);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << st.to_string();
  EXPECT_NE(st.message().find("CUDA"), std::string::npos) << st.to_string();
  st = transport_->irecv(0, 0, message_header(1, 16), host.data(), 64, &h);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << st.to_string();
  st = native(NativeCollective::kAllreduce, host.data(), host.data(), 16, TIDEGATE_SUM,
              TIDEGATE_MEMORY_HOST);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_UNSUPPORTED) << st.to_string();
  st = native(NativeCollective::kAllreduce, host.data(), host.data(), 16);  // claims CUDA, is host
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << st.to_string();
}

}  // namespace
}  // namespace tidegate
