#include "store_bridge.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace tidegate_torch {

namespace {

// Return codes of tidegate_store_t's callbacks (tidegate.h).
constexpr int kOk = 0;
constexpr int kTimedOut = 1;
constexpr int kFailed = 2;

}  // namespace

tidegate_store_t StoreBridge::callbacks() {
  tidegate_store_t callbacks;
  callbacks.ctx = this;
  callbacks.set = &StoreBridge::set;
  callbacks.get = &StoreBridge::get;
  return callbacks;
}

std::string StoreBridge::last_store_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_error_;
}

void StoreBridge::remember(const std::exception& e) {
  // c10's errors carry a C++ backtrace in what(); the message alone is what helps here.
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::lock_guard<std::mutex> lock(mutex_);
  last_error_ = c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
}

// Exceptions must not cross the C callback boundary: each becomes a return code, and its text
// is kept for the error message.
int StoreBridge::set(void* ctx, const char* key, const void* value, size_t len) {
  auto* self = static_cast<StoreBridge*>(ctx);
  try {
    const auto* bytes = static_cast<const uint8_t*>(value);
    self->store_->set(key, std::vector<uint8_t>(bytes, bytes + len));
    return kOk;
  } catch (const std::exception& e) {
    self->remember(e);
    return kFailed;
  }
}

int StoreBridge::get(void* ctx, const char* key, void* value, size_t capacity, size_t* len,
                     int64_t timeout_ms) {
  auto* self = static_cast<StoreBridge*>(ctx);
  try {
    // c10d reads a zero timeout as "wait forever", tidegate as "do not wait".
    if (timeout_ms <= 0) {
      if (!self->store_->check({key})) return kTimedOut;
    } else {
      self->store_->wait({key}, std::chrono::milliseconds(timeout_ms));
    }
    const std::vector<uint8_t> found = self->store_->get(key);
    *len = found.size();
    if (!found.empty()) std::memcpy(value, found.data(), std::min(capacity, found.size()));
    return kOk;
  } catch (const c10::DistStoreError& e) {
    // What every c10d store throws when a wait times out.
    self->remember(e);
    return kTimedOut;
  } catch (const std::exception& e) {
    self->remember(e);
    return kFailed;
  }
}

}  // namespace tidegate_torch
