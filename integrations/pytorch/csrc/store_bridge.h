// The c10d Store that torch.distributed hands a backend, as tidegate_store_t callbacks, so that
// tidegate_comm_create rendezvouses through it and nothing else has to be configured.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <mutex>
#include <string>

#include "tidegate/tidegate.h"

namespace tidegate_torch {

class StoreBridge {
 public:
  explicit StoreBridge(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  // Callbacks whose ctx is this bridge; valid while it lives. tidegate calls them only from
  // the thread inside tidegate_comm_create.
  tidegate_store_t callbacks();

  // The text of the last exception the store threw (empty if none), so that a failed creation
  // can say what the store reported rather than only that a callback failed.
  std::string last_store_error() const;

 private:
  static int set(void* ctx, const char* key, const void* value, size_t len);
  static int get(void* ctx, const char* key, void* value, size_t capacity, size_t* len,
                 int64_t timeout_ms);
  void remember(const std::exception& e);

  c10::intrusive_ptr<c10d::Store> store_;
  mutable std::mutex mutex_;
  std::string last_error_;  // guarded by mutex_
};

}  // namespace tidegate_torch
