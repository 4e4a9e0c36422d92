// An in-process Transport for tests: N ranks run as threads of one process and exchange
// messages through a shared LoopbackHub. It keeps the transport contract (base/transport.h):
// per (sender, receiver, channel) FIFO matching, the receiver's expected header checked with
// check_wire_header() before any payload byte is copied, abort that fails every pending and
// later transfer on every rank, and a blocking progress() that wakes on completions.
//
// By default sends are rendezvous: a send completes only once a receive matched it and the
// payload was copied straight from the sender's buffer into the receiver's. That is the
// strictest behaviour a real transport may show, so algorithms that would deadlock on a
// transport with little buffering deadlock here too (and tests catch it). eager_limit_bytes
// lets small sends complete at once from a private copy instead.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "base/transport.h"

namespace tidegate::testing {

struct LoopbackOptions {
  size_t eager_limit_bytes = 0;  // sends up to this size complete without a matching receive
  // What capabilities() reports as receives_ahead, so that algorithms' round-by-round path
  // (for transports that forbid receives ahead, like nccl) runs in tests too.
  bool receives_ahead = true;
};

class LoopbackHub {
 public:
  explicit LoopbackHub(int size, LoopbackOptions options = {});
  ~LoopbackHub();

  int size() const { return size_; }
  // The transport of `rank`; owned by the caller, must not outlive the hub. One per rank.
  std::unique_ptr<Transport> connect(int rank);

 private:
  friend class LoopbackTransport;

  struct Transfer {
    int owner = 0;  // rank whose handle this is
    bool done = false;
    Status status;
    size_t length = 0;  // payload bytes moved
  };
  struct PendingSend {
    Transport::Handle handle = 0;  // 0 once the send completed eagerly
    WireHeader header;
    const void* payload = nullptr;
    std::vector<char> eager_copy;
  };
  struct PendingRecv {
    Transport::Handle handle = 0;
    WireHeader expected;
    void* payload = nullptr;
    size_t capacity = 0;
  };
  struct Link {
    std::deque<PendingSend> sends;
    std::deque<PendingRecv> recvs;
  };
  using LinkKey = std::tuple<int, int, uint32_t>;  // sender, receiver, channel

  Status isend(int rank, int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Transport::Handle* handle);
  Status irecv(int rank, int peer, uint32_t channel, const WireHeader& expected, void* payload,
               size_t bytes, Transport::Handle* handle);
  Status test(int rank, Transport::Handle handle, bool* done, size_t* payload_bytes);
  Status progress(int rank, Milliseconds max_wait, bool* activity);
  void wake(int rank);
  void abort(int rank, const Status& reason);

  // Pairs the send and receive at the front of `link` (lock held), then copies and completes
  // them with the lock released, so that large copies of different pairs run in parallel.
  void match_front(std::unique_lock<std::mutex>& lock, Link& link, int sender, int receiver);
  void complete(Transport::Handle handle, Status status, size_t length);  // lock held
  Transport::Handle new_transfer(int owner);                              // lock held
  Status failure_for(int rank) const;                                     // lock held

  const int size_;
  const LoopbackOptions options_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::condition_variable>> wakeups_;  // per rank
  std::vector<uint64_t> events_;                                   // per rank, bumped on change
  std::vector<uint64_t> seen_events_;                              // per rank, by progress()
  std::map<LinkKey, Link> links_;
  std::map<Transport::Handle, Transfer> transfers_;
  Transport::Handle next_handle_ = 1;
  bool aborted_ = false;
  int aborting_rank_ = -1;
  Status abort_reason_;
};

}  // namespace tidegate::testing
