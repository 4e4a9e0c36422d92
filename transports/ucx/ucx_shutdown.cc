// UCX transport: failure, abort messages, close and release of UCX resources.
#include <algorithm>
#include <cstring>
#include <vector>

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
// How long local closes (after a flush, or forced) may take once the flush's deadline passed.
constexpr int64_t kCloseGraceMs = 100;
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
  // Which endpoints deserve a flush: not one whose peer already failed (a flush to a dead
  // peer could only time out), nor any when nothing graceful is left (force, after a failure).
  // But when this rank sent abort messages, flush even then: a forced close can drop a message
  // UCX reported sent, and a peer still waiting on this rank would report the lost connection
  // instead of the root cause (the conformance suite saw "Endpoint timeout" under load).
  //
  // The flush comes first, on its own, bounded by `deadline`; then every endpoint is closed,
  // by force where its flush did not finish. A close that flushes would wait on a peer that is
  // alive but not running (SIGSTOP, a debugger) past any deadline, and destroying the worker
  // under such a close's still-pending sends fails a UCX assertion and aborts the process.
  std::vector<char> flushed(eps_.size(), 0);
  std::vector<void*> flushing(eps_.size(), nullptr);
  for (size_t peer = 0; peer < eps_.size(); ++peer) {
    if (eps_[peer] == nullptr || !((!force || abort_sent_) && peer_errors_[peer].is_ok())) continue;
    ucp_request_param_t param{};
    void* request = ucp_ep_flush_nbx(eps_[peer], &param);
    if (UCS_PTR_IS_PTR(request)) {
      flushing[peer] = request;
    } else {
      flushed[peer] = UCS_PTR_STATUS(request) == UCS_OK;
    }
  }
  while (true) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    bool pending = false;
    for (size_t peer = 0; peer < eps_.size(); ++peer) {
      if (flushing[peer] == nullptr) continue;
      const ucs_status_t status = ucp_request_check_status(flushing[peer]);
      if (status == UCS_INPROGRESS) {
        pending = true;
        continue;
      }
      flushed[peer] = status == UCS_OK;
      ucp_request_free(flushing[peer]);
      flushing[peer] = nullptr;
    }
    if (!pending || deadline.passed()) break;
  }
  const bool flush_timed_out =
      std::any_of(flushing.begin(), flushing.end(), [](void* r) { return r != nullptr; });
  std::vector<void*> closing;
  for (size_t peer = 0; peer < eps_.size(); ++peer) {
    if (eps_[peer] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // Everything sent to a flushed peer has arrived: its close has nothing left to wait for.
    // A forced close cancels what is still outstanding (an unfinished flush included).
    param.flags = flushed[peer] ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    void* request = ucp_ep_close_nbx(eps_[peer], &param);
    if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
    eps_[peer] = nullptr;
    // An unfinished flush is completed (cancelled) by the forced close; UCX releases it then.
    if (flushing[peer] != nullptr) ucp_request_free(flushing[peer]);
  }
  // The closes left are local (flushed, or forced): they get a short while of their own even
  // when the flush used up `deadline`, so that the worker is not destroyed under them.
  const Deadline closes_deadline = deadline.remaining() > Milliseconds(kCloseGraceMs)
                                       ? deadline
                                       : Deadline::after_ms(kCloseGraceMs);
  bool done = false;
  while (true) {
    const bool parts_done = drain(Deadline::after_ms(0));
    done = parts_done && std::all_of(closing.begin(), closing.end(), [](void* r) {
             return ucp_request_check_status(r) != UCS_INPROGRESS;
           });
    if (done || closes_deadline.passed()) break;
  }
  for (void* request : closing) ucp_request_free(request);  // released by UCX once complete
  if (!done || flush_timed_out)
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

void UcxTransport::discard_unexpected(std::vector<char>* scratch, Deadline deadline) {
  while (!deadline.passed()) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker_, 0, 0, 1, &info);  // any tag, removed
    if (message == nullptr) return;
    scratch->resize(std::max(scratch->size(), info.length));
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_contig(1);
    void* request = ucp_tag_msg_recv_nbx(worker_, scratch->data(), info.length, message, &param);
    if (!UCS_PTR_IS_PTR(request)) continue;  // done at once (or failed: nothing to wait for)
    while (ucp_request_check_status(request) == UCS_INPROGRESS && !deadline.passed()) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(request);  // released by UCX once complete
  }
}

UcxTransport::~UcxTransport() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Outlives the worker: a discarded message still arriving is written here until its end.
  std::vector<char> scratch;
  if (worker_ != nullptr) {
    (void)release(Deadline::after_ms(kReleaseDrainMs), !failed_.is_ok());
    // Messages that arrived and that no receive took (the peers of a failed op went on
    // sending): UCX warns about each one when the worker is destroyed ("unexpected tag-receive
    // descriptor ... was not matched"), hundreds of lines after a failure that bury its cause.
    // They are received and dropped first.
    discard_unexpected(&scratch, Deadline::after_ms(kCloseGraceMs));
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
