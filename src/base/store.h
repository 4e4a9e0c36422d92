// The rendezvous key-value store interface used while communicators are created: ranks publish
// addresses under keys and wait for each other's. Implementations: the built-in TCP store
// (tcp_store_client.h), the caller's callbacks (callback_store.h), and a key-prefixing wrapper.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

// Keys are at most kMaxStoreKeyBytes, values at most kMaxStoreValueBytes: every
// implementation enforces them so that no wire length can size a huge allocation.
inline constexpr size_t kMaxStoreKeyBytes = 512;
inline constexpr size_t kMaxStoreValueBytes = size_t{1} << 20;

class Store {
 public:
  virtual ~Store() = default;
  // Stores value under key (overwriting). Thread-compatible (one caller at a time).
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Waits until key exists, then returns its value; TIMEOUT at the deadline.
  virtual Status get(const std::string& key, Deadline deadline, std::string* value) = 0;
};

// Wraps a store so every key gets `prefix` in front (scopes keys per communicator).
std::unique_ptr<Store> make_prefix_store(Store* inner, std::string prefix);

}  // namespace tidegate
