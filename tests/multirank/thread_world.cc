#include "thread_world.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace tidegate::testing {

namespace {

int store_set(void* ctx, const char* key, const void* value, size_t len) {
  auto* store = static_cast<MemoryStore*>(ctx);
  return store->set(key, std::string(static_cast<const char*>(value), len)).is_ok() ? 0 : 2;
}

int store_get(void* ctx, const char* key, void* value, size_t capacity, size_t* len,
              int64_t timeout_ms) {
  auto* store = static_cast<MemoryStore*>(ctx);
  std::string found;
  Status st = store->get(key, Deadline::after_ms(timeout_ms), &found);
  if (st.code() == TIDEGATE_ERR_TIMEOUT) return 1;
  if (!st.is_ok()) return 2;
  *len = found.size();
  std::memcpy(value, found.data(), std::min(capacity, found.size()));
  return 0;
}

}  // namespace

tidegate_store_t ThreadWorld::callbacks(MemoryStore* store) {
  tidegate_store_t callbacks;
  callbacks.ctx = store;
  callbacks.set = &store_set;
  callbacks.get = &store_get;
  return callbacks;
}

ThreadWorld::ThreadWorld(int size) : comms_(static_cast<size_t>(size), nullptr) {
  std::vector<tidegate_status_t> results(static_cast<size_t>(size), TIDEGATE_OK);
  std::vector<std::string> messages(static_cast<size_t>(size));
  const tidegate_store_t store = callbacks(&store_);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        results[r] = tidegate_comm_create(r, size, &store, &comms_[r]);
        if (results[r] != TIDEGATE_OK) messages[r] = tidegate_last_error();
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(results[r], TIDEGATE_OK) << "rank " << r << ": " << messages[r];
  }
}

ThreadWorld::~ThreadWorld() {
  run([](int, tidegate_comm_t comm) { tidegate_comm_destroy(comm); });
}

void ThreadWorld::run(const std::function<void(int, tidegate_comm_t)>& body) const {
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) threads.emplace_back([&, r] { body(r, comms_[r]); });
  for (auto& t : threads) t.join();
}

ThreadWorld& ThreadWorld::shared(int size) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<ThreadWorld>> worlds;
  std::lock_guard<std::mutex> lock(mutex);
  auto& world = worlds[size];
  if (!world) world = std::make_unique<ThreadWorld>(size);
  return *world;
}

}  // namespace tidegate::testing
