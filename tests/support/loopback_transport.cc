#include "loopback_transport.h"

#include <cstring>
#include <string>

namespace tidegate::testing {

// One rank's view of the hub.
class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(LoopbackHub* hub, int rank) : hub_(hub), rank_(rank) {}

  const char* name() const override { return "loopback"; }
  TransportCapabilities capabilities() const override {
    TransportCapabilities caps;
    caps.receives_ahead = hub_->options_.receives_ahead;
    return caps;
  }

  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override {
    return hub_->isend(rank_, peer, channel, header, payload, bytes, handle);
  }
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override {
    return hub_->irecv(rank_, peer, channel, expected, payload, bytes, handle);
  }
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override {
    return hub_->test(rank_, handle, done, payload_bytes);
  }
  Status progress(Milliseconds max_wait, bool* activity) override {
    return hub_->progress(rank_, max_wait, activity);
  }
  void wake() override { hub_->wake(rank_); }
  void abort(const Status& reason) override { hub_->abort(rank_, reason); }
  Status close(Deadline /*deadline*/) override { return Status::ok(); }

 private:
  LoopbackHub* hub_;
  int rank_;
};

LoopbackHub::LoopbackHub(int size, LoopbackOptions options)
    : size_(size),
      options_(options),
      events_(static_cast<size_t>(size), 0),
      seen_events_(static_cast<size_t>(size), 0) {
  for (int r = 0; r < size; ++r) wakeups_.push_back(std::make_unique<std::condition_variable>());
}

LoopbackHub::~LoopbackHub() = default;

std::unique_ptr<Transport> LoopbackHub::connect(int rank) {
  return std::make_unique<LoopbackTransport>(this, rank);
}

Transport::Handle LoopbackHub::new_transfer(int owner) {
  const Transport::Handle handle = next_handle_++;
  transfers_[handle].owner = owner;
  return handle;
}

void LoopbackHub::complete(Transport::Handle handle, Status status, size_t length) {
  auto it = transfers_.find(handle);
  if (it == transfers_.end() || it->second.done) return;
  it->second.done = true;
  it->second.status = std::move(status);
  it->second.length = length;
  const size_t owner = static_cast<size_t>(it->second.owner);
  ++events_[owner];
  wakeups_[owner]->notify_all();
}

Status LoopbackHub::failure_for(int rank) const {
  if (rank == aborting_rank_) return abort_reason_;
  return Status(abort_reason_.code(),
                "rank " + std::to_string(aborting_rank_) + " failed: " + abort_reason_.message());
}

Status LoopbackHub::isend(int rank, int peer, uint32_t channel, const WireHeader& header,
                          const void* payload, size_t bytes, Transport::Handle* handle) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) return failure_for(rank);
  TG_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank, "loopback isend: bad peer");
  TG_CHECK_ARG(header.payload_bytes == bytes, "loopback isend: header payload_bytes != bytes");
  TG_CHECK_ARG(bytes == 0 || payload != nullptr, "loopback isend: null payload");
  *handle = new_transfer(rank);
  Link& link = links_[LinkKey{rank, peer, channel}];
  PendingSend send;
  send.handle = *handle;
  send.header = header;
  send.payload = payload;
  if (bytes <= options_.eager_limit_bytes && link.recvs.empty()) {
    const char* bytes_in = static_cast<const char*>(payload);
    send.eager_copy.assign(bytes_in, bytes_in + bytes);
    complete(send.handle, Status::ok(), bytes);
    send.handle = 0;
  }
  link.sends.push_back(std::move(send));
  if (!link.recvs.empty()) match_front(lock, link, rank, peer);
  return Status::ok();
}

Status LoopbackHub::irecv(int rank, int peer, uint32_t channel, const WireHeader& expected,
                          void* payload, size_t bytes, Transport::Handle* handle) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) return failure_for(rank);
  TG_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank, "loopback irecv: bad peer");
  TG_CHECK_ARG(bytes == 0 || payload != nullptr, "loopback irecv: null payload");
  *handle = new_transfer(rank);
  Link& link = links_[LinkKey{peer, rank, channel}];
  PendingRecv recv;
  recv.handle = *handle;
  recv.expected = expected;
  recv.payload = payload;
  recv.capacity = bytes;
  link.recvs.push_back(recv);
  if (!link.sends.empty()) match_front(lock, link, peer, rank);
  return Status::ok();
}

void LoopbackHub::match_front(std::unique_lock<std::mutex>& /*lock*/, Link& link, int sender,
                              int receiver) {
  PendingSend send = std::move(link.sends.front());
  link.sends.pop_front();
  PendingRecv recv = link.recvs.front();
  link.recvs.pop_front();
  // The receiver judges the header before a payload byte lands, as a real transport does.
  Status status = check_wire_header(recv.expected, send.header, receiver, sender);
  if (status.is_ok() && send.header.payload_bytes > recv.capacity) {
    status = protocol_error("loopback: message longer than the posted receive");
  }
  if (status.is_ok() && send.header.payload_bytes > 0) {
    // Copied under the lock: a receiver that fails (abort) may free its buffer at once, so no
    // copy may still be running when a transfer is reported failed.
    const void* source = send.eager_copy.empty() ? send.payload : send.eager_copy.data();
    std::memcpy(recv.payload, source, static_cast<size_t>(send.header.payload_bytes));
  }
  const size_t length = static_cast<size_t>(send.header.payload_bytes);
  complete(recv.handle, std::move(status), length);
  if (send.handle != 0) complete(send.handle, Status::ok(), length);
}

Status LoopbackHub::test(int rank, Transport::Handle handle, bool* done, size_t* payload_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = transfers_.find(handle);
  TG_CHECK_ARG(it != transfers_.end() && it->second.owner == rank,
               "loopback test: unknown handle " + std::to_string(handle));
  *done = it->second.done;
  if (!*done) return Status::ok();
  if (payload_bytes != nullptr) *payload_bytes = it->second.length;
  Status status = std::move(it->second.status);
  transfers_.erase(it);
  return status;
}

Status LoopbackHub::progress(int rank, Milliseconds max_wait, bool* activity) {
  std::unique_lock<std::mutex> lock(mutex_);
  const size_t r = static_cast<size_t>(rank);
  if (events_[r] == seen_events_[r] && max_wait.count() > 0) {
    wakeups_[r]->wait_for(lock, max_wait, [&] { return events_[r] != seen_events_[r]; });
  }
  *activity = events_[r] != seen_events_[r];
  seen_events_[r] = events_[r];
  if (aborted_) return failure_for(rank);
  return Status::ok();
}

void LoopbackHub::wake(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++events_[static_cast<size_t>(rank)];
  wakeups_[static_cast<size_t>(rank)]->notify_all();
}

void LoopbackHub::abort(int rank, const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  aborting_rank_ = rank;
  abort_reason_ = reason;
  for (auto& [handle, transfer] : transfers_) {
    if (!transfer.done) complete(handle, failure_for(transfer.owner), 0);
  }
  for (size_t r = 0; r < wakeups_.size(); ++r) {
    ++events_[r];
    wakeups_[r]->notify_all();
  }
}

}  // namespace tidegate::testing
