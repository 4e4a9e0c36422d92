// A barrier for the ranks of a thread world whose wait ends at a deadline: a rank whose body
// stopped early (a failed assertion) must not leave the others waiting forever.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "base/types.h"

namespace tidegate::conformance {

class DeadlineBarrier {
 public:
  explicit DeadlineBarrier(int parties) : parties_(parties) {}

  // Returns true once all parties arrived; false (and the barrier stays broken, so later
  // calls return at once) when the deadline passed first.
  bool arrive_and_wait(Deadline deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) return false;
    const uint64_t generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return true;
    }
    const bool met = changed_.wait_until(lock, deadline.at(),
                                         [&] { return generation_ != generation || broken_; });
    if (!met) {
      broken_ = true;
      changed_.notify_all();
    }
    return met && !broken_;
  }

 private:
  const int parties_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

}  // namespace tidegate::conformance
