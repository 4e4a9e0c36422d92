// The adapter from the C API's store callbacks to the internal Store interface.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bootstrap/callback_store.h"

namespace tidegate {
namespace {

// A C-style store behind tidegate_store_t, recording how it was called.
struct FakeStore {
  std::map<std::string, std::string> values;
  int set_result = 0;
  int get_result_when_missing = 1;  // what get returns for a missing key (1 = timeout)
  int set_calls = 0;
  std::vector<size_t> get_capacities;
  std::vector<int64_t> get_timeouts;
  bool grow_on_every_call = false;  // reports a length just over each capacity

  static int set(void* ctx, const char* key, const void* value, size_t len) {
    auto* self = static_cast<FakeStore*>(ctx);
    ++self->set_calls;
    if (self->set_result != 0) return self->set_result;
    self->values[key] = std::string(static_cast<const char*>(value), len);
    return 0;
  }
  static int get(void* ctx, const char* key, void* value, size_t capacity, size_t* len,
                 int64_t timeout_ms) {
    auto* self = static_cast<FakeStore*>(ctx);
    self->get_capacities.push_back(capacity);
    self->get_timeouts.push_back(timeout_ms);
    if (self->grow_on_every_call) {
      *len = capacity + 1;
      return 0;
    }
    auto it = self->values.find(key);
    if (it == self->values.end()) return self->get_result_when_missing;
    *len = it->second.size();
    std::memcpy(value, it->second.data(), std::min(capacity, it->second.size()));
    return 0;
  }
  tidegate_store_t callbacks() { return tidegate_store_t{this, &FakeStore::set, &FakeStore::get}; }
};

TEST(CallbackStore, SetThenGetRoundTrips) {
  FakeStore fake;
  CallbackStore store(fake.callbacks());
  ASSERT_TRUE(store.set("k", std::string("a\0b", 3)).is_ok());
  EXPECT_EQ(fake.values["k"], std::string("a\0b", 3));
  std::string value;
  ASSERT_TRUE(store.get("k", Deadline::after_ms(1'000), &value).is_ok());
  EXPECT_EQ(value, std::string("a\0b", 3));
  EXPECT_EQ(fake.get_capacities.size(), 1u);
}

TEST(CallbackStore, ValueLargerThanTheFirstBufferIsFetchedAgain) {
  FakeStore fake;
  std::string big(100'000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
  fake.values["big"] = big;
  CallbackStore store(fake.callbacks());
  std::string value;
  ASSERT_TRUE(store.get("big", Deadline::after_ms(1'000), &value).is_ok());
  EXPECT_EQ(value, big);
  ASSERT_EQ(fake.get_capacities.size(), 2u);
  EXPECT_LT(fake.get_capacities[0], big.size());
  EXPECT_EQ(fake.get_capacities[1], big.size());
}

TEST(CallbackStore, TimeoutCodeBecomesTimeoutNamingTheKey) {
  FakeStore fake;
  CallbackStore store(fake.callbacks());
  std::string value = "untouched";
  Status st = store.get("missing-key", Deadline::after_ms(500), &value);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("missing-key"), std::string::npos) << st.message();
  EXPECT_EQ(value, "untouched");
  // The callback was given the time left on the deadline, in milliseconds.
  ASSERT_EQ(fake.get_timeouts.size(), 1u);
  EXPECT_LE(fake.get_timeouts[0], 500);
  EXPECT_GT(fake.get_timeouts[0], 400);
}

TEST(CallbackStore, OtherCodesAreFailuresNamingTheKey) {
  FakeStore fake;
  fake.set_result = 7;
  fake.get_result_when_missing = -3;
  CallbackStore store(fake.callbacks());
  Status set_status = store.set("the-key", "v");
  EXPECT_EQ(set_status.code(), TIDEGATE_ERR_PEER_FAILED);
  EXPECT_NE(set_status.message().find("the-key"), std::string::npos);
  EXPECT_NE(set_status.message().find("7"), std::string::npos);
  std::string value;
  Status get_status = store.get("other-key", Deadline::after_ms(100), &value);
  EXPECT_EQ(get_status.code(), TIDEGATE_ERR_PEER_FAILED);
  EXPECT_NE(get_status.message().find("other-key"), std::string::npos);
}

TEST(CallbackStore, ValueThatNeverFitsIsAProtocolErrorAfterBoundedRetries) {
  FakeStore fake;
  fake.grow_on_every_call = true;
  CallbackStore store(fake.callbacks());
  std::string value;
  Status st = store.get("shifty", Deadline::after_ms(100), &value);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_PROTOCOL);
  EXPECT_NE(st.message().find("shifty"), std::string::npos);
  EXPECT_LE(fake.get_capacities.size(), 4u);
}

TEST(CallbackStore, ReportedLengthOverTheCapIsRefusedWithoutAllocating) {
  FakeStore fake;
  fake.values["huge"] = std::string(kMaxStoreValueBytes + 1, 'x');
  CallbackStore store(fake.callbacks());
  std::string value;
  EXPECT_EQ(store.get("huge", Deadline::after_ms(100), &value).code(), TIDEGATE_ERR_PROTOCOL);
  EXPECT_EQ(fake.get_capacities.size(), 1u);  // no second call with a huge buffer
}

TEST(CallbackStore, KeysAndValuesAreCheckedBeforeTheCallbacksRun) {
  FakeStore fake;
  CallbackStore store(fake.callbacks());
  EXPECT_EQ(store.set(std::string("a\0b", 3), "v").code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(store.set(std::string(kMaxStoreKeyBytes + 1, 'k'), "v").code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(store.set("k", std::string(kMaxStoreValueBytes + 1, 'v')).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  std::string value;
  EXPECT_EQ(store.get(std::string("a\0b", 3), Deadline::after_ms(100), &value).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fake.set_calls, 0);
  EXPECT_TRUE(fake.get_capacities.empty());
}

TEST(CallbackStore, FactoryRefusesMissingCallbacks) {
  std::unique_ptr<Store> store;
  EXPECT_EQ(make_callback_store(nullptr, &store).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  FakeStore fake;
  tidegate_store_t no_get = fake.callbacks();
  no_get.get = nullptr;
  EXPECT_EQ(make_callback_store(&no_get, &store).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  tidegate_store_t no_set = fake.callbacks();
  no_set.set = nullptr;
  EXPECT_EQ(make_callback_store(&no_set, &store).code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(store, nullptr);
  tidegate_store_t complete = fake.callbacks();
  ASSERT_TRUE(make_callback_store(&complete, &store).is_ok());
  EXPECT_TRUE(store->set("k", "v").is_ok());
}

}  // namespace
}  // namespace tidegate
