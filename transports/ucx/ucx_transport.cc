// UCX transport: posting, completions and progress (the design is described in ucx_transport.h).
#include "transports/ucx/ucx_transport.h"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <chrono>

namespace tidegate {
namespace ucx {

namespace {

// How long a transfer's peer failure waits for an abort message before it is reported. The rank
// that found the root cause (a mismatch, a user abort) sends its abort message and then closes;
// our side may see the closed connection first (UCX reports it on another path than the
// message), and would then report "connection lost" instead of the error that started it.
constexpr int64_t kAbortGraceMs = 500;
// A rank answers liveness pings at most this often.
constexpr int64_t kLivenessAnswerMs = 500;

constexpr ucp_tag_t kKindMask = ucp_tag_t{3} << 62;
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};

ucp_tag_t make_tag(uint8_t kind, uint32_t channel, int sender) {
  return (ucp_tag_t{kind} << 62) | (ucp_tag_t{channel} << 32) | static_cast<uint32_t>(sender);
}

}  // namespace

Status UcxTransport::check_usable(int peer, uint32_t channel) const {
  if (!failed_.is_ok()) return failed_;
  if (closed_) return aborted_error(who_ + ": the ucx transport is closed");
  TG_CHECK_ARG(
      peer >= 0 && peer < size_ && peer != rank_,
      who_ + ": peer " + std::to_string(peer) + " is not another rank of " + std::to_string(size_));
  TG_CHECK_ARG(channel <= kMaxChannel, "channel " + std::to_string(channel) +
                                           " exceeds the largest the ucx tag holds (" +
                                           std::to_string(kMaxChannel) + ")");
  return Status::ok();
}

// Posting failures leave the tag streams unpaired, so callers fail the whole transport.
Status UcxTransport::post(Handle handle, Kind kind, int peer, uint32_t channel, void* buffer,
                          size_t bytes, bool is_recv) {
  auto owned = std::make_unique<Part>();
  Part* part = owned.get();
  part->self = this;
  part->handle = handle;
  part->kind = kind;
  part->is_recv = is_recv;
  part->bytes = bytes;
  ucp_request_param_t param{};
  // No immediate completion: every request completes through its callback, one code path.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.datatype = ucp_dt_make_contig(1);
  param.user_data = part;
  // Headers and abort messages live in our host buffers; payloads (user memory, possibly CUDA)
  // keep UCS_MEMORY_TYPE_UNKNOWN so that UCX detects their memory type itself.
  if (kind != Kind::kPayload) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
  }
  void* request = nullptr;
  if (is_recv) {
    param.cb.recv = &UcxTransport::on_recv;
    const bool any = kind == Kind::kAbort || kind == Kind::kPing;
    request = ucp_tag_recv_nbx(worker_, buffer, bytes,
                               make_tag(static_cast<uint8_t>(kind), channel, any ? 0 : peer),
                               any ? kKindMask : kFullMask, &param);
  } else {
    param.cb.send = &UcxTransport::on_send;
    request = ucp_tag_send_nbx(eps_[static_cast<size_t>(peer)], buffer, bytes,
                               make_tag(static_cast<uint8_t>(kind), channel, rank_), &param);
  }
  if (UCS_PTR_IS_ERR(request)) {
    return peer_failed(who_ + (is_recv ? ": receive from rank " : ": send to rank ") +
                       std::to_string(peer) +
                       " failed: " + ucs_status_string(UCS_PTR_STATUS(request)));
  }
  part->request = request;
  parts_.emplace(part, std::move(owned));
  return Status::ok();
}

void UcxTransport::on_send(void* request, ucs_status_t status, void* user_data) {
  Part* part = static_cast<Part*>(user_data);
  part->request = request;
  part->status = status;
  part->fired = true;
  part->self->completed_.push_back(part);
}

void UcxTransport::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data) {
  Part* part = static_cast<Part*>(user_data);
  part->request = request;
  part->status = status;
  part->fired = true;
  if (status == UCS_OK && info != nullptr) {
    part->length = info->length;
    part->sender_tag = info->sender_tag;
  }
  part->self->completed_.push_back(part);
}

// Called from ucp_worker_progress (so under mutex_). A peer that closed after its last message
// is not yet an error; check_dead_peers() fails the transport once this rank waits on it.
void UcxTransport::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  EpArg* ep = static_cast<EpArg*>(arg);
  UcxTransport* self = ep->self;
  if (self->closed_) return;
  self->peer_errors_[static_cast<size_t>(ep->peer)] =
      peer_failed(self->who_ + ": the connection to rank " + std::to_string(ep->peer) +
                  " failed: " + ucs_status_string(status));
}

Status UcxTransport::isend(int peer, uint32_t channel, const WireHeader& header,
                           const void* payload, size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_usable(peer, channel));
  TG_RETURN_IF_ERROR(check_send_arguments(header, payload, bytes));
  Op* op = nullptr;
  const Handle h = book_.add_send(peer, channel, header, &op);
  Status st = post(h, Kind::kHeader, peer, channel, op->wire.data(), kWireHeaderBytes, false);
  if (st.is_ok()) ++op->parts_left;
  // UCX only reads a send buffer; its API takes a non-const pointer.
  if (st.is_ok() && bytes > 0) {
    st = post(h, Kind::kPayload, peer, channel, const_cast<void*>(payload), bytes, false);
    if (st.is_ok()) ++op->parts_left;
  }
  op->payload_posted = true;
  if (!st.is_ok()) fail(st, true);
  *handle = h;
  return Status::ok();  // a posting failure is reported by test(), like any failed transfer
}

Status UcxTransport::irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload,
                           size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_usable(peer, channel));
  TG_RETURN_IF_ERROR(check_recv_arguments(expected, payload, bytes));
  Op* op = nullptr;
  const Handle h = book_.add_recv(peer, channel, expected, payload, &op);
  Status st = post(h, Kind::kHeader, peer, channel, op->wire.data(), kWireHeaderBytes, true);
  if (st.is_ok()) ++op->parts_left;
  if (!st.is_ok()) fail(st, true);
  *handle = h;
  return Status::ok();
}

Status UcxTransport::test(Handle handle, bool* done, size_t* payload_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return book_.test(handle, done, payload_bytes);
}

// The receiver's check: only a header that checks out lets its payload receive be posted.
void UcxTransport::finish_header(Op& op) {
  Status st = book_.accept_header(op, rank_, [this](Handle h, Op& ready) {
    const size_t bytes = ready.length;
    if (bytes == 0) return Status::ok();
    TG_RETURN_IF_ERROR(post(h, Kind::kPayload, ready.peer, ready.channel, ready.data, bytes, true));
    ++ready.parts_left;
    return Status::ok();
  });
  // A mismatch: the peer's payload messages no longer pair with our receives.
  if (!st.is_ok()) fail(st, true);
}

void UcxTransport::on_complete(Part& part) {
  if (part.kind == Kind::kAbort) {
    if (part.is_recv && part.status == UCS_OK) on_abort_message(part);
    return;
  }
  if (part.kind == Kind::kPing) {
    if (part.is_recv && part.status == UCS_OK) on_ping(part);
    return;
  }
  Op* pending = book_.find_pending(part.handle);
  if (pending == nullptr) return;  // failed meanwhile; the request is drained
  Op& op = *pending;
  if (part.is_recv) last_heard_[static_cast<size_t>(op.peer)] = Clock::now();
  Status st;
  if (part.status != UCS_OK) {
    suspect_peer_failure(
        peer_failed(who_ + (part.is_recv ? ": receive from rank " : ": send to rank ") +
                    std::to_string(op.peer) + " failed: " + ucs_status_string(part.status)));
    return;  // the op stays pending until the grace ends or an abort message fails it
  }
  if (part.is_recv && part.length != part.bytes) {
    st = protocol_error(who_ + ": rank " + std::to_string(op.peer) + " sent a " +
                        std::to_string(part.length) + "-byte message where " +
                        std::to_string(part.bytes) + " bytes were expected");
  }
  if (!st.is_ok()) {
    fail(st, true);
    return;
  }
  --op.parts_left;
  if (part.is_recv && part.kind == Kind::kHeader) finish_header(op);
  if (!op.done) TransferBook<Op>::settle(op);
}

bool UcxTransport::poll_once() {
  bool progressed = false;
  ping_arrived_ = false;
  while (ucp_worker_progress(worker_) != 0) progressed = true;
  const bool completed = reap();
  // The worker's progress alone says nothing when it was (perhaps only) a ping's.
  bool moved = completed || (progressed && !ping_arrived_);
  if (!moved) check_dead_peers();
  return moved;
}

bool UcxTransport::reap() {
  bool any = false;
  // Handling a completion may post requests whose callbacks append to completed_ again, and
  // may fail the transport, which drains (and reaps) from inside this loop: each part leaves
  // parts_ before it is handled so a nested drain does not wait for it.
  while (!completed_.empty()) {
    std::vector<Part*> batch;
    batch.swap(completed_);
    for (Part* part : batch) {
      std::unique_ptr<Part> owned;
      auto it = parts_.find(part);
      if (it != parts_.end()) {
        owned = std::move(it->second);
        parts_.erase(it);
      }
      if (part->request != nullptr) ucp_request_free(part->request);
      if (part->kind != Kind::kPing) any = true;
      on_complete(*part);
    }
  }
  return any;
}

// Only when the worker is idle: a message the peer sent before it went away has been matched
// by then, so a transfer still pending with a failed peer can never finish.
void UcxTransport::check_dead_peers() {
  if (!failed_.is_ok()) return;
  book_.for_each_pending([this](const Op& op) {
    const Status& err = peer_errors_[static_cast<size_t>(op.peer)];
    if (!err.is_ok()) suspect_peer_failure(err);  // the first one is kept
  });
}

void UcxTransport::suspect_peer_failure(const Status& status) {
  if (!failed_.is_ok() || !suspected_.is_ok()) return;  // the first one is reported
  suspected_ = status;
  suspected_until_ = Clock::now() + Milliseconds(kAbortGraceMs);
}

void UcxTransport::settle_suspected_failure() {
  if (suspected_.is_ok() || !failed_.is_ok()) return;
  if (Clock::now() >= suspected_until_) fail(suspected_, true);
}

Status UcxTransport::progress(Milliseconds max_wait, bool* activity) {
  *activity = false;
  const Clock::time_point until = Clock::now() + max_wait;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (closed_) return failed_;
    // ucp_worker_progress until it returns 0 (UCX's condition for arming), then our callbacks.
    const bool moved = poll_once();
    *activity |= moved;
    settle_suspected_failure();
    if (!failed_.is_ok() || moved || woken_.exchange(false)) return failed_;
    // While a peer failure waits out its grace, wake when the grace ends.
    const Clock::time_point wake_at =
        suspected_.is_ok() ? until : std::min(until, suspected_until_ + Milliseconds(1));
    const Clock::duration left = wake_at - Clock::now();
    if (left <= Clock::duration::zero()) return failed_;
    // Arm the event fd; BUSY means events arrived meanwhile, so poll again at once.
    const ucs_status_t s = ucp_worker_arm(worker_);
    if (s == UCS_ERR_BUSY) continue;
    if (s != UCS_OK) {
      fail(ucx_error(who_ + ": ucp_worker_arm", s), true);
      return failed_;
    }
    // Sleep for exactly what is left (capped), never 0: a whole-millisecond timeout would
    // round a sub-millisecond remainder down to 0 and turn the wait into a busy spin, which
    // on a shared CPU keeps the peer we wait for off it until the scheduler's next tick.
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::min<Clock::duration>(left, Milliseconds(kMaxSleepMs)));
    timespec timeout{};
    timeout.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
    timeout.tv_nsec = static_cast<long>(ns.count() % 1000000000);
    lock.unlock();  // abort() may run while we sleep
    pollfd fd{efd_, POLLIN, 0};
    ::ppoll(&fd, 1, &timeout, nullptr);
    lock.lock();
  }
}

void UcxTransport::on_ping(const Part& part) {
  ping_arrived_ = true;
  const auto sender = static_cast<size_t>(part.sender_tag & 0xffffffffu);
  if (sender < last_heard_.size()) last_heard_[sender] = Clock::now();
  if (!failed_.is_ok() || closed_) return;
  if (!post(0, Kind::kPing, 0, 0, &ping_in_, sizeof ping_in_, true).is_ok()) return;
  if (Clock::now() - last_ping_sent_ >= Milliseconds(kLivenessAnswerMs)) ping_peers();
}

void UcxTransport::ping_peers() {
  if (!failed_.is_ok() || closed_) return;
  last_ping_sent_ = Clock::now();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || !peer_errors_[static_cast<size_t>(peer)].is_ok()) continue;
    (void)post(0, Kind::kPing, peer, 0, &ping_out_, 0, false);  // best effort
  }
}

void UcxTransport::send_liveness() {
  std::lock_guard<std::mutex> lock(mutex_);
  ping_peers();
}

Clock::time_point UcxTransport::last_heard(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peer >= 0 && peer < size_ ? last_heard_[static_cast<size_t>(peer)] : Clock::time_point();
}

size_t UcxTransport::standing_receives() const {
  size_t standing = 0;
  for (const auto& entry : parts_) {
    const Part& part = *entry.second;
    const bool kind = part.kind == Kind::kAbort || part.kind == Kind::kPing;
    standing += kind && part.is_recv && !part.fired ? 1 : 0;
  }
  return standing;
}

void UcxTransport::wake() {
  woken_.store(true);
  // Safe from any thread and without our mutex (UCX documents it so). The worker exists for
  // the transport's whole life: it is destroyed only in the destructor.
  if (worker_ != nullptr) ucp_worker_signal(worker_);
}

}  // namespace ucx

}  // namespace tidegate
