#include "bootstrap/callback_store.h"

#include <algorithm>

#include "bootstrap/tcp_store_protocol.h"

namespace tidegate {

namespace {

// Most rendezvous values are addresses and small tables: start small, grow on demand.
constexpr size_t kInitialGetCapacity = 4096;
// A value that keeps changing size between two calls is retried at most this often.
constexpr int kMaxGetAttempts = 4;
// Callback return codes from tidegate.h.
constexpr int kCallbackOk = 0;
constexpr int kCallbackTimeout = 1;

// The callbacks take NUL-terminated keys, so a key with an embedded NUL would be cut short.
Status check_key(const std::string& key) {
  TG_RETURN_IF_ERROR(check_store_key(key));
  if (key.find('\0') != std::string::npos) {
    return invalid_argument("store key '" + key.substr(0, key.find('\0')) +
                            "...' contains a NUL byte, which C store callbacks cannot carry");
  }
  return Status::ok();
}

// Milliseconds left, rounded up so that a callback is never asked for less than remains.
int64_t remaining_ms(Deadline deadline) {
  return std::max<int64_t>(0,
                           std::chrono::ceil<Milliseconds>(deadline.at() - Clock::now()).count());
}

}  // namespace

Status CallbackStore::set(const std::string& key, const std::string& value) {
  TG_RETURN_IF_ERROR(check_key(key));
  TG_RETURN_IF_ERROR(check_store_value(key, value));
  TG_CHECK_ARG(callbacks_.set != nullptr, "store callbacks have no set function");
  const int rc = callbacks_.set(callbacks_.ctx, key.c_str(), value.data(), value.size());
  if (rc != kCallbackOk) {
    return peer_failed("the caller's store set callback failed for key '" + key + "' (returned " +
                       std::to_string(rc) + ")");
  }
  return Status::ok();
}

Status CallbackStore::get(const std::string& key, Deadline deadline, std::string* value) {
  TG_RETURN_IF_ERROR(check_key(key));
  TG_CHECK_ARG(callbacks_.get != nullptr, "store callbacks have no get function");
  std::string buffer(kInitialGetCapacity, '\0');
  for (int attempt = 0; attempt < kMaxGetAttempts; ++attempt) {
    size_t length = 0;
    const int rc = callbacks_.get(callbacks_.ctx, key.c_str(), buffer.data(), buffer.size(),
                                  &length, remaining_ms(deadline));
    if (rc == kCallbackTimeout) {
      return timeout_error("store key '" + key +
                           "' was not set before the deadline (the caller's store get callback "
                           "timed out); did every rank start?");
    }
    if (rc != kCallbackOk) {
      return peer_failed("the caller's store get callback failed for key '" + key + "' (returned " +
                         std::to_string(rc) + ")");
    }
    if (length > kMaxStoreValueBytes) {
      return protocol_error("the caller's store holds a " + std::to_string(length) +
                            "-byte value for key '" + key + "', over the limit of " +
                            std::to_string(kMaxStoreValueBytes));
    }
    if (length <= buffer.size()) {
      buffer.resize(length);
      *value = std::move(buffer);
      return Status::ok();
    }
    // The value did not fit: the key exists now, so the second call returns at once.
    buffer.assign(length, '\0');
  }
  return protocol_error("the caller's store returned a value of a different size on each of " +
                        std::to_string(kMaxGetAttempts) + " calls for key '" + key + "'");
}

Status make_callback_store(const tidegate_store_t* callbacks, std::unique_ptr<Store>* store) {
  TG_CHECK_ARG(callbacks != nullptr, "store callbacks are null");
  TG_CHECK_ARG(callbacks->set != nullptr, "store callbacks have no set function");
  TG_CHECK_ARG(callbacks->get != nullptr, "store callbacks have no get function");
  *store = std::make_unique<CallbackStore>(*callbacks);
  return Status::ok();
}

}  // namespace tidegate
