// An in-process store: ranks that run as threads of one process (tests, single-process
// multi-communicator programs) rendezvous through it. Thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "base/store.h"

namespace tidegate {

class MemoryStore : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  Status get(const std::string& key, Deadline deadline, std::string* value) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

}  // namespace tidegate
