#include "bootstrap/memory_store.h"

#include <memory>

namespace tidegate {

Status MemoryStore::set(const std::string& key, const std::string& value) {
  TG_CHECK_ARG(key.size() <= kMaxStoreKeyBytes, "store key longer than 512 bytes");
  TG_CHECK_ARG(value.size() <= kMaxStoreValueBytes, "store value larger than 1 MiB");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
  return Status::ok();
}

Status MemoryStore::get(const std::string& key, Deadline deadline, std::string* value) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool present = changed_.wait_until(lock, deadline.at(), [&] { return values_.count(key) > 0; });
  if (!present) return timeout_error("store key '" + key + "' was not set before the deadline");
  *value = values_[key];
  return Status::ok();
}

namespace {
class PrefixStore : public Store {
 public:
  PrefixStore(Store* inner, std::string prefix) : inner_(inner), prefix_(std::move(prefix)) {}
  Status set(const std::string& key, const std::string& value) override {
    return inner_->set(prefix_ + key, value);
  }
  Status get(const std::string& key, Deadline deadline, std::string* value) override {
    return inner_->get(prefix_ + key, deadline, value);
  }

 private:
  Store* inner_;
  std::string prefix_;
};
}  // namespace

std::unique_ptr<Store> make_prefix_store(Store* inner, std::string prefix) {
  return std::make_unique<PrefixStore>(inner, std::move(prefix));
}

}  // namespace tidegate
