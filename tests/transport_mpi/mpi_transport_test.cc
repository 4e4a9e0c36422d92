// MPI transport tests: one gtest process per rank under mpirun (-np 2 or 3); every rank runs
// every test in the same order, each test over a fresh transport (its own MPI_Comm_dup).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
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

// Rank 0 sends 8 messages on each of 3 channels, interleaved; rank 1 posts its receives
// channel by channel: each channel must deliver its own messages in posting order.
TEST(MpiTransport, FifoPerChannel) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  constexpr int kPerChannel = 8;
  constexpr uint32_t kChannels = 3;
  std::vector<std::vector<int>> data(kChannels * kPerChannel, std::vector<int>(100));
  std::vector<Transport::Handle> handles;
  if (w.rank == 0) {
    for (int k = 0; k < kPerChannel; ++k) {
      for (uint32_t c = 0; c < kChannels; ++c) {
        auto& buf = data[c * kPerChannel + static_cast<uint32_t>(k)];
        std::iota(buf.begin(), buf.end(), static_cast<int>(c * 1000 + static_cast<uint32_t>(k)));
        Transport::Handle h = 0;
        ASSERT_TRUE(
            w.transport
                ->isend(1, c, header_for(0, static_cast<uint32_t>(k), 400), buf.data(), 400, &h)
                .is_ok());
        handles.push_back(h);
      }
    }
  } else if (w.rank == 1) {
    for (uint32_t c = kChannels; c-- > 0;) {
      for (int k = 0; k < kPerChannel; ++k) {
        Transport::Handle h = 0;
        auto& buf = data[c * kPerChannel + static_cast<uint32_t>(k)];
        ASSERT_TRUE(
            w.transport
                ->irecv(0, c, header_for(0, static_cast<uint32_t>(k), 400), buf.data(), 400, &h)
                .is_ok());
        handles.push_back(h);
      }
    }
  }
  Status st = wait_all(*w.transport, handles);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  if (w.rank == 1) {
    for (uint32_t c = 0; c < kChannels; ++c) {
      for (int k = 0; k < kPerChannel; ++k) {
        EXPECT_EQ(data[c * kPerChannel + static_cast<uint32_t>(k)][5],
                  static_cast<int>(c * 1000 + static_cast<uint32_t>(k) + 5));
      }
    }
  }
  EXPECT_TRUE(w.transport->close(Deadline::after_ms(5000)).is_ok());
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

// Rank 0 sends count 10, rank 1 expects 11: rank 1's receive fails with MISMATCH naming both
// ranks and the field, and rank 0 learns of it through rank 1's abort message.
TEST(MpiTransport, HeaderMismatchNamesRanksAndField) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  std::vector<float> buf(16);
  if (w.rank == 0) {
    Transport::Handle h = 0;
    WireHeader sent = header_for(0, 0, 64);
    sent.count = 10;
    ASSERT_TRUE(w.transport->isend(1, 0, sent, buf.data(), 64, &h).is_ok());
    Transport::Handle never = 0;  // a receive that only the failure can finish
    ASSERT_TRUE(w.transport->irecv(1, 0, header_for(1, 0, 64), buf.data(), 64, &never).is_ok());
    Status st = wait_all(*w.transport, {h, never});
    EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH) << st.to_string();
    EXPECT_NE(st.message().find("rank 1 aborted"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("field 'count'"), std::string::npos) << st.message();
  } else if (w.rank == 1) {
    Transport::Handle h = 0;
    WireHeader expected = header_for(0, 0, 64);
    expected.count = 11;
    ASSERT_TRUE(w.transport->irecv(0, 0, expected, buf.data(), 64, &h).is_ok());
    Status st = wait_all(*w.transport, {h});
    EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH) << st.to_string();
    EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("field 'count'"), std::string::npos) << st.message();
  }
  MPI_Barrier(MPI_COMM_WORLD);  // no rank frees its transport while another still expects mail
}

// abort() on the last rank, from a thread other than the one driving progress, reaches every
// peer's pending receive with its code and message.
TEST(MpiTransport, AbortReachesPeers) {
  World w;
  ASSERT_NE(w.transport, nullptr);
  const int aborter = w.size - 1;
  std::vector<char> buf(32);
  if (w.rank == aborter) {
    std::thread other([&] { w.transport->abort(timeout_error("boom from the test")); });
    other.join();
    bool activity = false;
    EXPECT_EQ(w.transport->progress(Milliseconds(0), &activity).code(), TIDEGATE_ERR_TIMEOUT);
  } else {
    Transport::Handle h = 0;
    ASSERT_TRUE(
        w.transport->irecv(aborter, 0, header_for(aborter, 0, 32), buf.data(), 32, &h).is_ok());
    Status st = wait_all(*w.transport, {h});
    EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();
    EXPECT_NE(st.message().find("rank " + std::to_string(aborter) + " aborted: boom from the test"),
              std::string::npos)
        << st.message();
  }
  MPI_Barrier(MPI_COMM_WORLD);
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
