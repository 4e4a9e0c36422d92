// UCX transport tests: ranks are threads of this process, each with its own UcxTransport (its
// own ucp context and worker), meeting through one in-memory store. When UCX cannot create a
// context, worker or endpoints here, the tests skip with UCX's reason, never pass. What every
// transport owes (round trips, channels, header checks, abort, ...) is tested once for all in
// tests/transport_conformance; these are UCX's own: the abort grace against a lost connection,
// a vanished peer, sleeping progress and the CUDA capability.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/auth.h"
#include "base/config.h"
#include "base/transport.h"
#include "bootstrap/memory_store.h"
#include "transports/ucx/ucx_transport.h"

namespace tidegate {
namespace {

constexpr uint64_t kCommId = 0x7e57c0de;
constexpr int64_t kTestTimeoutMs = 30000;

void run_ranks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back(body, rank);
  for (std::thread& thread : threads) thread.join();
}

struct RankInputs {
  Config config;
  Secret secret;
  TransportContext context;
};

class UcxWorld {
 public:
  explicit UcxWorld(int size)
      : inputs_(static_cast<size_t>(size)),
        transports_(static_cast<size_t>(size)),
        statuses_(static_cast<size_t>(size)) {
    run_ranks(size, [&](int rank) {
      RankInputs& in = inputs_[static_cast<size_t>(rank)];
      in.secret = Secret::from_text("ucx-test-secret");
      in.context.rank = rank;
      in.context.size = size;
      in.context.comm_id = kCommId;
      in.context.config = &in.config;
      in.context.store = &store_;
      in.context.secret = &in.secret;
      in.context.deadline = Deadline::after_ms(kTestTimeoutMs);
      statuses_[static_cast<size_t>(rank)] =
          create_ucx_transport(in.context, &transports_[static_cast<size_t>(rank)]);
    });
  }
  // "" when every rank connected; otherwise the first failure, for GTEST_SKIP / FAIL.
  std::string failure() const {
    for (const Status& st : statuses_) {
      if (!st.is_ok()) return st.to_string();
    }
    return "";
  }
  bool unsupported() const {
    for (const Status& st : statuses_) {
      if (st.code() == TIDEGATE_ERR_UNSUPPORTED) return true;
    }
    return false;
  }
  Transport& at(int rank) { return *transports_[static_cast<size_t>(rank)]; }
  void destroy(int rank) { transports_[static_cast<size_t>(rank)].reset(); }
  // Closes every rank concurrently (a flush may need the peer to make progress).
  void close_all() {
    run_ranks(static_cast<int>(transports_.size()), [&](int rank) {
      EXPECT_TRUE(at(rank).close(Deadline::after_ms(5000)).is_ok()) << "rank " << rank;
    });
  }

 private:
  MemoryStore store_;
  std::vector<RankInputs> inputs_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<Status> statuses_;
};

#define UCX_WORLD(name, size)                                                      \
  UcxWorld name(size);                                                             \
  if (name.unsupported()) GTEST_SKIP() << "UCX unusable here: " << name.failure(); \
  ASSERT_EQ(name.failure(), "")

std::vector<Status> wait_all(Transport& transport, const std::vector<Transport::Handle>& handles) {
  const Deadline deadline = Deadline::after_ms(kTestTimeoutMs);
  std::vector<Status> results(handles.size(),
                              timeout_error("transfer still pending at the deadline"));
  std::vector<bool> finished(handles.size(), false);
  size_t left = handles.size();
  while (left > 0 && !deadline.passed()) {
    bool activity = false;
    (void)transport.progress(Milliseconds(20), &activity);  // failures surface through test()
    for (size_t i = 0; i < handles.size(); ++i) {
      if (finished[i]) continue;
      bool done = false;
      Status st = transport.test(handles[i], &done);
      if (!done && st.is_ok()) continue;
      finished[i] = true;
      results[i] = st;
      --left;
    }
  }
  return results;
}

WireHeader header_for(int sender, uint64_t op_seq, size_t bytes) {
  WireHeader header;
  header.comm_id = kCommId;
  header.op_kind = OpKind::kInternal;
  header.dtype = TIDEGATE_UINT8;
  header.op_seq = op_seq;
  header.count = static_cast<int64_t>(bytes);
  header.payload_bytes = bytes;
  header.sender_rank = static_cast<uint32_t>(sender);
  return header;
}

std::vector<unsigned char> pattern(int sender, int receiver, uint64_t seq, size_t bytes) {
  std::vector<unsigned char> data(bytes);
  uint64_t state = 0x9e3779b97f4a7c15ULL * (seq + 1) + static_cast<uint64_t>(sender) * 1000003 +
                   static_cast<uint64_t>(receiver) * 7919;
  for (size_t i = 0; i < bytes; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    data[i] = static_cast<unsigned char>(state >> 24);
  }
  return data;
}

// Every rank sends `count` messages to every other rank on `channel_of(seq)` and receives the
// same from each, posting receives in the order `recv_order` gives; all data is verified.
void exchange(UcxWorld& world, int size, int count,
              const std::function<size_t(int, int, int)>& bytes_of,
              const std::function<uint32_t(int)>& channel_of,
              const std::function<std::vector<int>(int)>& recv_order) {
  run_ranks(size, [&](int rank) {
    Transport& t = world.at(rank);
    std::vector<std::vector<unsigned char>> out, in, want;
    std::vector<Transport::Handle> handles;
    out.reserve(static_cast<size_t>(size * count));
    in.reserve(static_cast<size_t>(size * count));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      for (int seq : recv_order(count)) {
        const size_t n = bytes_of(peer, rank, seq);
        in.emplace_back(n);
        want.push_back(pattern(peer, rank, static_cast<uint64_t>(seq), n));
        Transport::Handle h = 0;
        ASSERT_TRUE(t.irecv(peer, channel_of(seq), header_for(peer, static_cast<uint64_t>(seq), n),
                            n ? in.back().data() : nullptr, n, &h)
                        .is_ok());
        handles.push_back(h);
      }
      for (int seq = 0; seq < count; ++seq) {
        const size_t n = bytes_of(rank, peer, seq);
        out.push_back(pattern(rank, peer, static_cast<uint64_t>(seq), n));
        Transport::Handle h = 0;
        ASSERT_TRUE(t.isend(peer, channel_of(seq), header_for(rank, static_cast<uint64_t>(seq), n),
                            n ? out.back().data() : nullptr, n, &h)
                        .is_ok());
        handles.push_back(h);
      }
    }
    for (const Status& st : wait_all(t, handles))
      EXPECT_TRUE(st.is_ok()) << "rank " << rank << ": " << st.to_string();
    for (size_t i = 0; i < in.size(); ++i)
      EXPECT_TRUE(in[i] == want[i]) << "rank " << rank << " message " << i;
  });
}

std::vector<int> in_order(int count) {
  std::vector<int> order;
  for (int i = 0; i < count; ++i) order.push_back(i);
  return order;
}

// The rank that finds the root cause sends its abort message and closes at once. A peer whose
// send to it is still in flight sees that send fail (the connection is gone) and must still
// report the abort's reason, not "connection failed": the CI once saw a mismatch reported as
// "send to rank 0 failed: Endpoint timeout" on one rank of three.
TEST(UcxTransport, AbortThenCloseWinsOverTheLostConnection) {
  UCX_WORLD(world, 3);
  // Connections up first: UCX 1.13 asserts when a worker is destroyed mid-wireup.
  exchange(
      world, 3, 1, [](int, int, int) { return size_t{64}; }, [](int) { return 0u; }, in_order);
  std::vector<Status> results(3);
  std::vector<unsigned char> bufs[3];
  std::atomic<int> posted{0};
  run_ranks(3, [&](int rank) {
    Transport& t = world.at(rank);
    if (rank == 0) {
      while (posted.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      t.abort(mismatch_error("rank 0 found the mismatch"));
      world.destroy(0);  // gone right after its abort message, as a failing process is
      return;
    }
    // A large send that rank 0 never receives stays in flight (rendezvous) until rank 0 leaves.
    bufs[rank].assign(size_t{4} << 20, static_cast<unsigned char>(rank));
    Transport::Handle h = 0;
    ASSERT_TRUE(t.isend(0, 5, header_for(rank, 1, bufs[rank].size()), bufs[rank].data(),
                        bufs[rank].size(), &h)
                    .is_ok());
    posted.fetch_add(1);
    results[static_cast<size_t>(rank)] = wait_all(t, {h})[0];
  });
  for (int rank = 1; rank < 3; ++rank) {
    const Status& st = results[static_cast<size_t>(rank)];
    EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH) << "rank " << rank << ": " << st.to_string();
    EXPECT_NE(st.message().find("rank 0 found the mismatch"), std::string::npos) << st.message();
  }
}

TEST(UcxTransport, VanishedPeerFailsPendingReceiveWithPeerFailed) {
  UCX_WORLD(world, 2);
  std::vector<unsigned char> in(64);
  Transport::Handle h = 0;
  ASSERT_TRUE(world.at(0).irecv(1, 0, header_for(1, 0, 64), in.data(), 64, &h).is_ok());
  world.destroy(1);  // its worker and endpoints go away without a message
  const Status st = wait_all(world.at(0), {h})[0];
  EXPECT_EQ(st.code(), TIDEGATE_ERR_PEER_FAILED) << st.to_string();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
}

// progress(max_wait) with nothing to do sleeps on the event fd for its whole max_wait instead
// of spinning: with a 1 ms wait (what the bandwidth probe uses) the remainder after the first
// poll is under a millisecond, which a whole-millisecond poll() timeout rounded to 0 and so
// turned into a busy loop that, on a shared CPU, kept the peer off it until the next tick.
// Both ranks wait at once after one exchange (connections up), as idle ranks of a job do.
TEST(UcxTransport, ShortProgressWaitsSleepInsteadOfSpinning) {
  UCX_WORLD(world, 2);
  exchange(
      world, 2, 1, [](int, int, int) { return size_t{64}; }, [](int) { return 0u; }, in_order);
  run_ranks(2, [&](int rank) {
    auto thread_cpu_ms = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    };
    constexpr int kCalls = 100;
    int idle_calls = 0;
    const double cpu_start = thread_cpu_ms();
    const auto wall_start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
      bool activity = false;
      ASSERT_TRUE(world.at(rank).progress(Milliseconds(1), &activity).is_ok());
      if (!activity) ++idle_calls;
    }
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
            .count();
    const double cpu_ms = thread_cpu_ms() - cpu_start;
    // Every idle call waited out its millisecond ...
    EXPECT_GE(wall_ms, 0.95 * idle_calls) << "rank " << rank << ": " << idle_calls << " idle calls";
    // ... asleep: a spinning wait costs about as much CPU as wall time.
    EXPECT_LT(cpu_ms, 0.25 * wall_ms)
        << "rank " << rank << ": cpu " << cpu_ms << " ms over " << wall_ms << " ms";
  });
  world.close_all();
}

// The capability tells the truth: CUDA memory exactly when a UCX context of this build reports
// UCS_MEMORY_TYPE_CUDA among its memory types (Debian's UCX has no CUDA support: false there).
TEST(UcxTransport, CudaCapabilityMatchesWhatUcxReports) {
  UCX_WORLD(world, 1);
  ucp_config_t* config = nullptr;
  ASSERT_EQ(ucp_config_read(nullptr, nullptr, &config), UCS_OK);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h context = nullptr;
  const ucs_status_t s = ucp_init(&params, config, &context);
  ucp_config_release(config);
  ASSERT_EQ(s, UCS_OK) << ucs_status_string(s);
  bool reported = false;
  const Status st = ucx::context_supports_cuda(context, &reported);
  ucp_cleanup(context);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(world.at(0).capabilities().cuda_memory, reported);
  EXPECT_TRUE(world.at(0).capabilities().host_memory);
  world.close_all();
}

}  // namespace
}  // namespace tidegate
