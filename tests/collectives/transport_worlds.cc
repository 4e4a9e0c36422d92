#include "transport_worlds.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "api/transport_registry.h"
#include "base/auth.h"
#include "base/config.h"
#include "bootstrap/memory_store.h"

namespace tidegate::testing {

namespace {

constexpr uint64_t kCommId = 42;  // the harness's TaskContext::comm_id
constexpr int64_t kTimeoutMs = 60000;

void on_threads(int count, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) threads.emplace_back(body, i);
  for (std::thread& thread : threads) thread.join();
}

struct RankInputs {
  Config config;
  Secret secret;
  TransportContext context;
};

class TransportWorld {
 public:
  // Connects every rank concurrently; *status is the first failure, an UNSUPPORTED one first
  // (the transport cannot run here), or OK.
  TransportWorld(const TransportEntry& entry, int size, Status* status)
      : inputs_(static_cast<size_t>(size)), transports_(static_cast<size_t>(size)) {
    std::vector<Status> statuses(static_cast<size_t>(size));
    on_threads(size, [&](int rank) {
      RankInputs& in = inputs_[static_cast<size_t>(rank)];
      Status st = in.config.set("TIDEGATE_TIMEOUT_MS", std::to_string(kTimeoutMs));
      in.secret = Secret::from_text("collectives-test-secret");
      in.context.rank = rank;
      in.context.size = size;
      in.context.comm_id = kCommId;
      in.context.config = &in.config;
      in.context.store = &store_;
      in.context.secret = &in.secret;
      in.context.deadline = Deadline::after_ms(kTimeoutMs);
      if (st.is_ok()) st = entry.create(in.context, &transports_[static_cast<size_t>(rank)]);
      statuses[static_cast<size_t>(rank)] = std::move(st);
    });
    *status = Status::ok();
    for (const Status& st : statuses) {
      if (st.code() == TIDEGATE_ERR_UNSUPPORTED || (status->is_ok() && !st.is_ok())) *status = st;
    }
  }

  ~TransportWorld() {
    // Every rank at once: a transport's teardown may wait briefly for its peers.
    on_threads(static_cast<int>(transports_.size()),
               [&](int rank) { transports_[static_cast<size_t>(rank)].reset(); });
  }

  std::vector<Transport*> transports() const {
    std::vector<Transport*> out;
    for (const auto& t : transports_) out.push_back(t.get());
    return out;
  }

 private:
  MemoryStore store_;
  std::vector<RankInputs> inputs_;
  std::vector<std::unique_ptr<Transport>> transports_;
};

using WorldKey = std::pair<std::string, int>;

std::map<WorldKey, std::unique_ptr<TransportWorld>>& worlds() {
  static std::map<WorldKey, std::unique_ptr<TransportWorld>> cache;
  return cache;
}

// Destroys the cached worlds after the last test, while UCX and the rest are still alive
// (static destructors would run after them).
class WorldsTeardown : public ::testing::Environment {
 public:
  void TearDown() override { worlds().clear(); }
};
[[maybe_unused]] const ::testing::Environment* const kTeardown =
    ::testing::AddGlobalTestEnvironment(new WorldsTeardown);

}  // namespace

Status shared_transports(const std::string& transport, int size, std::vector<Transport*>* out) {
  std::unique_ptr<TransportWorld>& world = worlds()[{transport, size}];
  if (world == nullptr) {
    const TransportEntry* entry = find_transport(transport);
    if (entry == nullptr) return unsupported("this build has no " + transport + " transport");
    Status connected;
    auto created = std::make_unique<TransportWorld>(*entry, size, &connected);
    TG_RETURN_IF_ERROR(connected);
    world = std::move(created);
  }
  *out = world->transports();
  return Status::ok();
}

void drop_shared_transports(const std::string& transport, int size) {
  worlds().erase({transport, size});
}

}  // namespace tidegate::testing
