// MPI transport: failure, abort messages, close and release of MPI resources.
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "transports/mpi/mpi_transport.h"
#include "transports/mpi/mpi_util.h"

namespace tidegate {
namespace mpi {

namespace {
// After a failure, how long to let cancelled receives and in-flight sends finish before the
// engine hands the user's buffers back: long enough for local completions, short enough not
// to stall a failing job (a dead peer's rendezvous sends never finish).
constexpr int64_t kFailDrainMs = 200;
// How long the destructor (no close() after a failure) waits for leftovers before freeing them.
constexpr int64_t kReleaseDrainMs = 1000;
}  // namespace

Status MpiTransport::post_abort_receive() {
  return check_mpi(MPI_Irecv(abort_in_.data(), static_cast<int>(abort_in_.size()), MPI_BYTE,
                             MPI_ANY_SOURCE, kAbortTag, comm_, &abort_recv_),
                   "MPI_Irecv (abort tag)");
}

// A peer's abort message: fails this transport with its code, naming the peer.
bool MpiTransport::check_abort_receive() {
  if (abort_recv_ == MPI_REQUEST_NULL || !failed_.is_ok()) return false;
  int flag = 0;
  MPI_Status status;
  const int rc = MPI_Test(&abort_recv_, &flag, &status);
  if (rc != MPI_SUCCESS) {
    fail(check_mpi(rc, "receiving a peer's abort message"), true);
    return true;
  }
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  fail(decode_abort_message(abort_in_.data(), static_cast<size_t>(std::max(count, 0)),
                            status.MPI_SOURCE),
       false);
  return true;
}

void MpiTransport::send_abort_messages(const Status& status) {
  if (abort_sent_ || closed_) return;
  abort_sent_ = true;
  abort_out_ = encode_abort_message(status);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    // Best effort: a peer that is gone simply never receives it.
    if (MPI_Isend(abort_out_.data(), static_cast<int>(abort_out_.size()), MPI_BYTE, peer, kAbortTag,
                  comm_, &request) == MPI_SUCCESS) {
      abort_sends_.push_back(request);
    }
  }
}

void MpiTransport::fail(const Status& status, bool tell_peers) {
  if (!failed_.is_ok()) return;
  failed_ = status;
  if (tell_peers) send_abort_messages(status);
  book_.fail_pending(status);
  // The data requests now belong to no transfer; receives are cancelled so MPI stops writing
  // into the user's buffers (sends cannot be cancelled reliably, they are left to finish;
  // native collectives cannot be cancelled at all and are marked is_recv = false).
  for (size_t i = 0; i < requests_.size(); ++i) {
    slots_[i].handle = 0;
    if (slots_[i].is_recv && requests_[i] != MPI_REQUEST_NULL) MPI_Cancel(&requests_[i]);
  }
  drain(Deadline::after_ms(kFailDrainMs));
  woken_.store(true);
}

bool MpiTransport::drain(Deadline deadline) {
  auto all_done = [](std::vector<MPI_Request>& requests) {
    if (requests.empty()) return true;
    int flag = 0;
    // Errors are irrelevant here: the requests belong to no transfer any more.
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE);
    return flag != 0;
  };
  while (true) {
    bool done = all_done(requests_);
    done &= all_done(abort_sends_);
    done &= all_done(ping_sends_);
    for (MPI_Request* persistent : {&abort_recv_, &ping_recv_}) {
      if (*persistent != MPI_REQUEST_NULL && closed_) {
        int flag = 0;
        MPI_Test(persistent, &flag, MPI_STATUS_IGNORE);
        done &= flag != 0;
      }
    }
    if (done) {
      requests_.clear();
      slots_.clear();
      abort_sends_.clear();
      ping_sends_.clear();
      return true;
    }
    if (deadline.passed()) return false;
    sched_yield();
  }
}

// Returns every MPI resource: cancels the abort receive, lets what is in flight finish until
// `deadline`, frees the rest (MPI completes freed sends in the background) and the duplicate.
void MpiTransport::release(Deadline deadline) {
  if (closed_) return;
  closed_ = true;
  // Before anything else: peers still finishing their own transfers must not read this
  // rank's closing connections as its process ending.
  if (exit_watch_) exit_watch_->say_goodbye();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI may no longer be called; its resources are gone anyway
  if (abort_recv_ != MPI_REQUEST_NULL) MPI_Cancel(&abort_recv_);
  if (ping_recv_ != MPI_REQUEST_NULL) MPI_Cancel(&ping_recv_);
  if (!drain(deadline)) {
    auto free_all = [](std::vector<MPI_Request>& requests) {
      for (MPI_Request& r : requests) {
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
      }
      requests.clear();
    };
    // A native collective's request may be neither freed nor cancelled (MPI forbids both for
    // nonblocking collectives): it is left to MPI, which completes it if every rank posted it
    // (see mpi_native.cc); only the point-to-point requests are freed.
    for (size_t i = 0; i < requests_.size(); ++i) {
      const bool native =
          slots_[i].part == Part::kNativeHeaders || slots_[i].part == Part::kNativeData;
      if (!native && requests_[i] != MPI_REQUEST_NULL) MPI_Request_free(&requests_[i]);
    }
    requests_.clear();
    free_all(abort_sends_);
    free_all(ping_sends_);
    slots_.clear();
    if (abort_recv_ != MPI_REQUEST_NULL) MPI_Request_free(&abort_recv_);
    if (ping_recv_ != MPI_REQUEST_NULL) MPI_Request_free(&ping_recv_);
  }
  // A failed transport keeps its communicators: a failure leaves messages no receive will ever
  // match (the payload behind a mismatching header, sends to a rank that stopped receiving),
  // and MPI reuses a freed communicator's context for the next MPI_Comm_dup. Open MPI's UCX
  // PML then delivers those stale messages to the next transport's receives, a payload with
  // no header to check first (the conformance suite saw MPI_ERR_TRUNCATE, and a payload of
  // the same length would be taken silently). Two handles per failed transport is the price.
  if (!failed_.is_ok()) return;
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&coll_comm_);  // deferred by MPI while a collective on it is still pending
}

void MpiTransport::abort(const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  const Status why = reason.is_ok() ? aborted_error(who_ + " aborted without a reason") : reason;
  send_abort_messages(why);  // also when already failed: peers may still wait on this rank
  fail(why, false);
  woken_.store(true);
}

Status MpiTransport::close(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::ok();
  if (!failed_.is_ok()) {
    release(Deadline::after_ms(kFailDrainMs));  // nothing graceful is left to do
    return Status::ok();
  }
  const size_t pending = book_.pending();
  if (pending > 0) {
    return invalid_argument("close() with " + std::to_string(pending) +
                            " transfer(s) pending: wait for them or abort() first");
  }
  release(deadline);
  return Status::ok();
}

MpiTransport::~MpiTransport() {
  std::lock_guard<std::mutex> lock(mutex_);
  release(Deadline::after_ms(kReleaseDrainMs));
}

}  // namespace mpi
}  // namespace tidegate
