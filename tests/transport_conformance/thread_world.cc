// Worlds whose ranks are threads of this process: each rank creates its transport through the
// transport registry, meeting the others through one in-memory store (tcp, ucx, nccl).
#include <gtest/gtest.h>

#include <thread>

#include "api/transport_registry.h"
#include "base/auth.h"
#include "base/config.h"
#include "bootstrap/memory_store.h"
#include "deadline_barrier.h"
#include "device_memory.h"
#include "world.h"

namespace tidegate::conformance {

namespace {

constexpr uint64_t kCommId = 0xc0f07e57;

void on_threads(int count, const std::function<void(int index)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) threads.emplace_back(body, i);
  for (std::thread& thread : threads) thread.join();
}

class ThreadRank final : public Rank {
 public:
  ThreadRank(int rank, int size, Transport& transport, DeadlineBarrier& barrier)
      : rank_(rank), size_(size), transport_(transport), barrier_(barrier) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  uint64_t comm_id() const override { return kCommId; }
  Transport& transport() override { return transport_; }
  void barrier() override {
    EXPECT_TRUE(barrier_.arrive_and_wait(Deadline::after_ms(kWaitMs)))
        << "rank " << rank_ << ": not every rank reached the barrier in time";
  }

 private:
  const int rank_;
  const int size_;
  Transport& transport_;
  DeadlineBarrier& barrier_;
};

// One rank's creation inputs, alive as long as its transport.
struct RankInputs {
  Config config;
  Secret secret;
  TransportContext context;
};

class ThreadWorld final : public World {
 public:
  explicit ThreadWorld(int size)
      : inputs_(static_cast<size_t>(size)),
        transports_(static_cast<size_t>(size)),
        statuses_(static_cast<size_t>(size)) {}

  ~ThreadWorld() override {
    // Worlds that never ran: every rank at once, a teardown may wait briefly for its peers.
    on_threads(size(), [&](int rank) { transports_[static_cast<size_t>(rank)].reset(); });
  }

  int size() const { return static_cast<int>(transports_.size()); }

  // Creates every rank's transport concurrently; statuses() says how each fared.
  void connect(const TransportEntry& entry) {
    on_threads(size(), [&](int rank) {
      RankInputs& in = inputs_[static_cast<size_t>(rank)];
      Status st = in.config.set("TIDEGATE_TIMEOUT_MS", std::to_string(kWaitMs));
      in.secret = Secret::from_text("conformance-secret");
      in.context.rank = rank;
      in.context.size = size();
      in.context.comm_id = kCommId;
      in.context.config = &in.config;
      in.context.store = &store_;
      in.context.secret = &in.secret;
      in.context.deadline = Deadline::after_ms(kWaitMs);
      if (st.is_ok()) st = entry.create(in.context, &transports_[static_cast<size_t>(rank)]);
      statuses_[static_cast<size_t>(rank)] = std::move(st);
    });
  }
  const std::vector<Status>& statuses() const { return statuses_; }

  void run(const RankBody& body) override {
    DeadlineBarrier barrier(size());
    on_threads(size(), [&](int rank) {
      std::unique_ptr<Transport>& transport = transports_[static_cast<size_t>(rank)];
      ASSERT_NE(transport, nullptr) << "run() twice on one world";
      ThreadRank view(rank, size(), *transport, barrier);
      body(view);
      transport.reset();  // as a process ends when its rank is done (world.h)
    });
  }

 private:
  MemoryStore store_;
  std::vector<RankInputs> inputs_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<Status> statuses_;
};

// Why this machine cannot run `ranks` nccl ranks as threads, or "".
std::string nccl_obstacle(int ranks) {
  std::string why;
  const int gpus = gpu_count(&why);
  if (gpus == 0) return "no CUDA device: " + why;
  if (gpus < ranks) {
    return "NCCL needs one GPU per rank and this machine has " + std::to_string(gpus) + " for " +
           std::to_string(ranks) + " ranks (a single GPU cannot hold two NCCL ranks)";
  }
  return "";
}

}  // namespace

std::vector<std::string> world_transports() { return {"tcp", "ucx", "nccl"}; }
std::vector<int> world_sizes() { return {2, 3}; }

std::unique_ptr<World> make_world(const std::string& transport, int ranks,
                                  std::string* skip_reason) {
  const TransportEntry* entry = find_transport(transport);
  if (entry == nullptr) {
    *skip_reason = "this build has no " + transport + " transport";
    return nullptr;
  }
  if (transport == "nccl") {
    *skip_reason = nccl_obstacle(ranks);
    if (!skip_reason->empty()) return nullptr;
  }
  auto world = std::make_unique<ThreadWorld>(ranks);
  world->connect(*entry);
  std::string failed;
  bool unsupported = false;
  for (size_t r = 0; r < world->statuses().size(); ++r) {
    const Status& st = world->statuses()[r];
    if (st.is_ok()) continue;
    unsupported |= st.code() == TIDEGATE_ERR_UNSUPPORTED;
    failed += "rank " + std::to_string(r) + ": " + st.to_string() + "\n";
  }
  if (failed.empty()) return world;
  // A transport that says it cannot run here (UCX without a usable device) is a skip.
  if (unsupported) {
    *skip_reason = transport + " cannot run here:\n" + failed;
  } else {
    ADD_FAILURE() << transport << " did not connect " << ranks << " ranks:\n" << failed;
  }
  return nullptr;
}

}  // namespace tidegate::conformance
