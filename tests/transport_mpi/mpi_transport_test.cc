// MPI transport tests: one gtest process per rank under mpirun (-np 2 or 3); every rank runs
// every test in the same order, each test over a fresh transport (its own MPI_Comm_dup). What
// every transport owes is tests/transport_conformance (conformance.mpirun.*); these are the
// mpi transport's own: chunking, stale messages of a failed transport, rank checks.
#include <mpi.h>

#include <gtest/gtest.h>

#include <vector>

#include "mpi_test_world.h"

namespace tidegate::mpi {
namespace {

MpiTransportOptions with_chunk(size_t chunk_bytes) {
  MpiTransportOptions options;
  options.chunk_bytes = chunk_bytes;
  return options;
}

WireHeader header_for(int sender, uint32_t chunk, size_t bytes) {
  WireHeader h;
  h.op_kind = OpKind::kAllreduce;
  h.count = static_cast<int64_t>(bytes);
  h.chunk = chunk;
  h.payload_bytes = bytes;
  h.sender_rank = static_cast<uint32_t>(sender);
  return h;
}

// Drives progress until every handle finished or 10 s passed; returns the first error.
Status wait_all(Transport& t, std::vector<Transport::Handle> handles) {
  const Deadline deadline = Deadline::after_ms(10000);
  Status first;
  while (!handles.empty()) {
    if (deadline.passed()) return timeout_error("transfers did not finish within 10 s");
    bool activity = false;
    Status st = t.progress(Milliseconds(10), &activity);
    for (size_t i = 0; i < handles.size();) {
      bool done = false;
      Status r = t.test(handles[i], &done);
      if (!r.is_ok() && first.is_ok()) first = r;
      if (done || !r.is_ok()) {
        handles.erase(handles.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    if (!st.is_ok()) return first.is_ok() ? st : first;
  }
  return first;
}

// A payload far larger than the (artificially tiny) chunk limit arrives intact, as
// 1 header + ceil(bytes / chunk) MPI messages, including a short last chunk and empty payloads.
TEST(MpiTransport, ChunksLargePayloads) {
  World w(with_chunk(/*chunk_bytes=*/4096));
  ASSERT_NE(w.transport, nullptr);
  const size_t bytes = (size_t{1} << 20) + 13;
  std::vector<unsigned char> buf(bytes);
  std::vector<Transport::Handle> handles(2);
  const int next = (w.rank + 1) % w.size;
  const int prev = (w.rank + w.size - 1) % w.size;
  std::vector<unsigned char> out(bytes);
  for (size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>((i * 7 + static_cast<size_t>(w.rank)) & 0xff);
  ASSERT_TRUE(
      w.transport->irecv(prev, 0, header_for(prev, 0, bytes), buf.data(), bytes, &handles[0])
          .is_ok());
  ASSERT_TRUE(
      w.transport->isend(next, 0, header_for(w.rank, 0, bytes), out.data(), bytes, &handles[1])
          .is_ok());
  Transport::Handle empty_recv = 0, empty_send = 0;
  ASSERT_TRUE(w.transport->irecv(prev, 0, header_for(prev, 1, 0), nullptr, 0, &empty_recv).is_ok());
  ASSERT_TRUE(
      w.transport->isend(next, 0, header_for(w.rank, 1, 0), nullptr, 0, &empty_send).is_ok());
  handles.push_back(empty_recv);
  handles.push_back(empty_send);
  Status st = wait_all(*w.transport, handles);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  // Receive payloads are posted once their headers checked out, so count after completion.
  auto* mt = static_cast<MpiTransport*>(w.transport.get());
  const uint64_t per_message = 1 + (bytes + 4095) / 4096;
  EXPECT_EQ(mt->messages_posted(), 2 * per_message + 2);
  size_t wrong = 0;
  for (size_t i = 0; i < bytes; ++i)
    wrong += buf[i] != static_cast<unsigned char>((i * 7 + static_cast<size_t>(prev)) & 0xff);
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
}

// A transport that failed leaves messages nobody receives (here the payload behind a refused
// header); the next transport's MPI_Comm_dup may get the freed communicator's context, and
// with Open MPI's UCX PML the stale payload would then fill the next receive of the same
// length: the failed transport keeps its communicators so that this cannot happen.
TEST(MpiTransport, StaleMessagesOfAFailedTransportNeverReachTheNext) {
  constexpr size_t kBytes = 4096;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    World failed;
    ASSERT_NE(failed.transport, nullptr);
    std::vector<unsigned char> stale(kBytes, 0xee), in(kBytes);
    Transport::Handle h = 0;
    if (rank == 0) {
      WireHeader sent = header_for(0, 0, kBytes);
      sent.count = 10;  // rank 1 expects 11: its check refuses the header, not the payload
      ASSERT_TRUE(failed.transport->isend(1, 0, sent, stale.data(), kBytes, &h).is_ok());
      Transport::Handle never = 0;
      ASSERT_TRUE(failed.transport->irecv(1, 0, header_for(1, 0, 0), nullptr, 0, &never).is_ok());
      EXPECT_EQ(wait_all(*failed.transport, {h, never}).code(), TIDEGATE_ERR_MISMATCH);
    } else if (rank == 1) {
      WireHeader expected = header_for(0, 0, kBytes);
      expected.count = 11;
      ASSERT_TRUE(failed.transport->irecv(0, 0, expected, in.data(), kBytes, &h).is_ok());
      EXPECT_EQ(wait_all(*failed.transport, {h}).code(), TIDEGATE_ERR_MISMATCH);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  World next;
  ASSERT_NE(next.transport, nullptr);
  std::vector<unsigned char> fresh(kBytes, 0x11), in(kBytes, 0);
  Transport::Handle h = 0;
  if (rank == 0) {
    ASSERT_TRUE(
        next.transport->isend(1, 0, header_for(0, 0, kBytes), fresh.data(), kBytes, &h).is_ok());
    EXPECT_TRUE(wait_all(*next.transport, {h}).is_ok());
  } else if (rank == 1) {
    ASSERT_TRUE(
        next.transport->irecv(0, 0, header_for(0, 0, kBytes), in.data(), kBytes, &h).is_ok());
    const Status st = wait_all(*next.transport, {h});
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(in, fresh) << "the next transport received the failed transport's payload";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Creation fails clearly, before any collective MPI call, when the ranks do not match.
TEST(MpiTransport, RankMismatchIsUnsupported) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  LocalStore store;
  Config config;
  TransportContext context;
  context.rank = rank;
  context.size = size + 1;
  context.config = &config;
  context.store = &store;
  std::unique_ptr<Transport> t;
  Status st = MpiTransport::create(context, MpiTransportOptions{}, &t);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("MPI_COMM_WORLD"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tidegate::mpi

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Only rank 0 prints gtest's report; every rank's verdict counts through the Allreduce.
  if (rank != 0) {
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return any;
}
