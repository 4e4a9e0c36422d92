// UCX transport: failure, abort messages, close and release of UCX resources.
#include <algorithm>
#include <cstring>

#include "transports/ucx/ucx_transport.h"

namespace tidegate {
namespace ucx {

namespace {
// After a failure, how long to let cancelled receives and in-flight sends finish before the
// engine hands the user's buffers back: long enough for local completions, short enough not
// to stall a failing job.
constexpr int64_t kFailDrainMs = 200;
// How long the destructor (no close() before it) waits for endpoints to flush.
constexpr int64_t kReleaseDrainMs = 1000;
}  // namespace

// A peer's abort message: fails this transport with its code, naming the peer.
void UcxTransport::on_abort_message(const Part& part) {
  const int sender = static_cast<int>(part.sender_tag & 0xffffffffu);
  fail(decode_abort_message(abort_in_.data(), part.length, sender), false);
}

void UcxTransport::send_abort_messages(const Status& status) {
  if (abort_sent_ || closed_) return;
  abort_sent_ = true;
  abort_out_ = encode_abort_message(status);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || eps_[static_cast<size_t>(peer)] == nullptr) continue;
    // Best effort: a peer that is gone simply never receives it.
    (void)post(0, Kind::kAbort, peer, 0, abort_out_.data(), abort_out_.size(), false);
  }
}

void UcxTransport::fail(const Status& status, bool tell_peers) {
  if (!failed_.is_ok()) return;
  failed_ = status;
  if (tell_peers) send_abort_messages(status);
  book_.fail_pending(status);
  // The data requests now belong to no transfer; receives are cancelled so UCX stops writing
  // into the user's buffers (sends are left to finish or fail).
  for (auto& entry : parts_) {
    Part& part = *entry.second;
    if (part.is_recv && part.kind != Kind::kAbort && part.kind != Kind::kPing && !part.fired)
      ucp_request_cancel(worker_, part.request);
  }
  drain(Deadline::after_ms(kFailDrainMs));
  woken_.store(true);
}

bool UcxTransport::drain(Deadline deadline) {
  while (true) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    reap();
    // The standing receives are outstanding until release() cancels them.
    const size_t standing = closed_ ? 0 : standing_receives();
    if (parts_.size() <= standing) return true;
    if (deadline.passed()) return false;
  }
}

Status UcxTransport::release(Deadline deadline, bool force) {
  if (closed_) return Status::ok();
  closed_ = true;  // also silences on_ep_error: closing endpoints may report their peers gone
  for (auto& entry : parts_) {
    Part& part = *entry.second;
    if (part.is_recv && !part.fired) ucp_request_cancel(worker_, part.request);
  }
  std::vector<void*> closing;
  for (size_t peer = 0; peer < eps_.size(); ++peer) {
    if (eps_[peer] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // Flush unless the endpoint already failed (a flush to a dead peer could only time out)
    // or nothing graceful is left (force, after a failure). But when this rank sent abort
    // messages, flush even then: a forced close can drop a message UCX reported sent, and a
    // peer still waiting on this rank would report the lost connection instead of the root
    // cause (the conformance suite saw "Endpoint timeout" under load). Bounded by `deadline`.
    const bool flush = (!force || abort_sent_) && peer_errors_[peer].is_ok();
    param.flags = flush ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    void* request = ucp_ep_close_nbx(eps_[peer], &param);
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
    eps_[peer] = nullptr;
  }
  bool done = false;
  while (true) {
    const bool parts_done = drain(Deadline::after_ms(0));
    done = parts_done && std::all_of(closing.begin(), closing.end(), [](void* r) {
             return ucp_request_check_status(r) != UCS_INPROGRESS;
           });
    if (done || deadline.passed()) break;
  }
  for (void* request : closing) ucp_request_free(request);  // released by UCX once complete
  if (!done)
    return timeout_error(who_ + ": the ucx endpoints did not finish flushing before the deadline");
  return Status::ok();
}

void UcxTransport::abort(const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || worker_ == nullptr) return;
  const Status why = reason.is_ok() ? aborted_error(who_ + " aborted without a reason") : reason;
  send_abort_messages(why);  // also when already failed: peers may still wait on this rank
  fail(why, false);
  // The engine may not call progress() again: push the abort messages out now.
  drain(Deadline::after_ms(kFailDrainMs));
  woken_.store(true);
  ucp_worker_signal(worker_);
}

Status UcxTransport::close(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::ok();
  if (!failed_.is_ok()) {
    (void)release(Deadline::after_ms(kFailDrainMs), true);  // nothing graceful is left to do
    return Status::ok();
  }
  const size_t pending = book_.pending();
  if (pending > 0) {
    return invalid_argument("close() with " + std::to_string(pending) +
                            " transfer(s) pending: wait for them or abort() first");
  }
  return release(deadline, false);
}

UcxTransport::~UcxTransport() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (worker_ != nullptr) {
    (void)release(Deadline::after_ms(kReleaseDrainMs), !failed_.is_ok());
    // Destroying the worker may still run callbacks of leftover requests; their parts stay
    // alive until after it.
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
  }
  parts_.clear();
  completed_.clear();
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace ucx
}  // namespace tidegate
