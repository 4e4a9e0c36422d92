// A Store over the C API's tidegate_store_t callbacks (tidegate.h), so that a trainer or
// PyTorch can rendezvous tidegate through a store it already runs. The adapter enforces the
// same key and value caps as every other store, turns the callbacks' integer results into
// Status errors that name the key, and hides the "buffer too small, call again" protocol of get.
#pragma once

#include <memory>

#include "base/status.h"
#include "base/store.h"
#include "tidegate/tidegate.h"

namespace tidegate {

// Thread-compatible, like the callbacks themselves (tidegate.h promises one calling thread).
class CallbackStore final : public Store {
 public:
  // Copies the callback table; its ctx must stay valid while the store is used. Null function
  // pointers are reported as INVALID_ARGUMENT by the call that needs them.
  explicit CallbackStore(const tidegate_store_t& callbacks) : callbacks_(callbacks) {}

  // Errors: INVALID_ARGUMENT (key/value over the caps, NUL in the key, no set function);
  // PEER_FAILED when the callback returns non-zero.
  Status set(const std::string& key, const std::string& value) override;
  // Errors: as set; TIMEOUT when the callback returns 1; PROTOCOL when the callback reports a
  // value over kMaxStoreValueBytes or one that changes size on every retry.
  Status get(const std::string& key, Deadline deadline, std::string* value) override;

 private:
  const tidegate_store_t callbacks_;
};

// Checks that `callbacks` and both of its functions are non-null (INVALID_ARGUMENT otherwise)
// and wraps them in a CallbackStore.
Status make_callback_store(const tidegate_store_t* callbacks, std::unique_ptr<Store>* store);

}  // namespace tidegate
