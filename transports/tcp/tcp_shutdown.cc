// TcpTransport's endings: failure (local or reported by a peer), abort() and close().
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "transports/tcp/tcp_transport.h"

namespace tidegate::tcp {

namespace {
// abort() tells the peers within this long (or TIDEGATE_TIMEOUT_MS if shorter): long enough
// to finish a half-written frame and write the ABORT, short enough not to stall a failing job.
constexpr int64_t kAbortFlushMs = 2000;
constexpr size_t kCloseReadBudgetBytes = size_t{1} << 20;
}  // namespace

void TcpTransport::fail(const Status& status, bool tell_peers) {
  if (!failed_.is_ok()) return;  // the first failure is the one reported
  failed_ = status;
  if (tell_peers) send_abort_frames(status);
  for (Peer& peer : peers_) {
    for (Stream& stream : peer.streams) {
      // Frames still queued point into buffers whose transfers fail now; the user may free
      // them as soon as test() says so, so nothing more is written from them.
      stream.abandon_output();
      update_interest(stream);
    }
  }
  for (auto& [handle, op] : ops_) {
    if (!op.done) complete(op, status);
  }
}

void TcpTransport::send_abort_frames(const Status& status) {
  if (abort_sent_) return;
  abort_sent_ = true;
  const std::string& message = status.message();
  FrameHeader frame;
  frame.type = FrameType::kAbort;
  frame.status_code = static_cast<uint32_t>(status.code());
  frame.length = std::min(message.size(), kMaxAbortMessageBytes);
  // Every connection carries one: the peer may not be reading some of them (parked), and
  // a connection busy with a partial frame delivers it only after that frame.
  for (Peer& peer : peers_) {
    for (Stream& stream : peer.streams) {
      stream.drop_unstarted();
      if (stream.output_broken()) continue;
      OutFrame out;
      out.prefix_bytes = encode_frame_prefix(frame, nullptr, out.prefix);
      out.owned_payload = message.substr(0, frame.length);
      out.payload_bytes = frame.length;
      stream.push_back(std::move(out));
    }
  }
  // Partial frames are finished from the user's buffers, which stay valid: their transfers
  // have not been reported failed yet. Whatever misses the deadline is abandoned.
  Status flushed = flush_all_until(Deadline::after_ms(std::min(timeout_ms_, kAbortFlushMs)));
  (void)flushed;  // best-effort: a peer that does not read learns of us by the lost connection
}

Status TcpTransport::flush_all_until(Deadline deadline) {
  while (true) {
    std::vector<pollfd> waiting;
    std::vector<Stream*> streams;
    for (Peer& peer : peers_) {
      for (Stream& stream : peer.streams) {
        if (!stream.has_output() || stream.output_broken()) continue;
        bool moved = false;
        if (!stream.flush(*this, &moved).is_ok()) {
          stream.abandon_output();
          continue;
        }
        if (!stream.has_output()) continue;
        waiting.push_back({stream.fd(), POLLOUT, 0});
        streams.push_back(&stream);
      }
    }
    if (waiting.empty()) return Status::ok();
    if (deadline.passed()) {
      for (Stream* stream : streams) stream->abandon_output();
      return timeout_error(who_ + " could not write to " + std::to_string(streams.size()) +
                           " connection(s) before the deadline");
    }
    ::poll(waiting.data(), waiting.size(), deadline.poll_timeout_ms());
  }
}

void TcpTransport::handle_stream_closed(Stream& stream) {
  const Peer& peer = peers_[stream.peer()];
  const bool said_bye = peer.bye_on_stream[stream.index()];
  if (said_bye && !stream.mid_receive()) return;  // the goodbye's end of stream
  std::string reason =
      stream.lost_errno() == 0 ? std::string("end of stream") : std::strerror(stream.lost_errno());
  if (!said_bye) {
    reason += " without a goodbye: the process died, or destroyed its transport without close()";
  }
  // Reported after a grace (settle_suspected_failure): a rank that aborts (or finds a
  // mismatch) writes its ABORT to every peer and ends, and a peer that learnt of it first may
  // end its own connections before that ABORT reaches this rank, whose reason must win over
  // "lost" (the conformance suite's abort case saw "lost" under load).
  if (!suspected_.is_ok()) return;  // the first lost connection is the one reported
  suspected_ = peer_failed(who_ + ": connection to rank " + std::to_string(stream.peer()) +
                           " lost (" + reason + "); " + std::to_string(pending_ops(stream.peer())) +
                           " transfer(s) with it were pending");
  suspected_until_ = Clock::now() + Milliseconds(kAbortGraceMs);
}

void TcpTransport::settle_suspected_failure() {
  if (!suspected_.is_ok() && failed_.is_ok() && Clock::now() >= suspected_until_)
    fail(suspected_, false);
}

size_t TcpTransport::pending_ops(int peer) const {
  return static_cast<size_t>(std::count_if(ops_.begin(), ops_.end(), [peer](const auto& entry) {
    return !entry.second.done && entry.second.peer == peer;
  }));
}

void TcpTransport::release_connections() {
  closed_ = true;
  for (Peer& peer : peers_) peer.streams.clear();  // closes the sockets, leaving the epoll set
}

void TcpTransport::abort(const Status& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  const Status why = reason.is_ok() ? aborted_error(who_ + " aborted without a reason") : reason;
  send_abort_frames(why);  // also when already failed: peers may still wait on this rank
  fail(why, false);
  wake();
}

Status TcpTransport::close(Deadline deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Status::ok();
  if (!failed_.is_ok()) {
    release_connections();  // nothing graceful is left to do
    return Status::ok();
  }
  const size_t pending = static_cast<size_t>(
      std::count_if(ops_.begin(), ops_.end(), [](const auto& e) { return !e.second.done; }));
  if (pending > 0) {
    return invalid_argument("close() with " + std::to_string(pending) +
                            " transfer(s) pending: wait for them or abort() first");
  }
  // Every connection gets a BYE before its end of stream, so peers tell this goodbye from a
  // crash. There is no waiting for the peers' own goodbyes: ranks may be destroyed one after
  // another by one thread, and a rank waiting here for the next one would stall them all.
  FrameHeader bye;
  bye.type = FrameType::kBye;
  for (Peer& peer : peers_) {
    for (Stream& stream : peer.streams) {
      OutFrame out;
      out.prefix_bytes = encode_frame_prefix(bye, nullptr, out.prefix);
      stream.push_back(std::move(out));
    }
  }
  Status flushed = flush_all_until(deadline);
  for (Peer& peer : peers_) {
    for (Stream& stream : peer.streams) {
      ::shutdown(stream.fd(), SHUT_WR);
      // Consume what already arrived (a peer's own BYE): closing a socket with unread bytes
      // resets the connection instead of ending it.
      bool moved = false;
      Status drained = stream.receive(*this, kCloseReadBudgetBytes, &moved);
      (void)drained;  // the connection ends here either way
    }
  }
  release_connections();
  if (!flushed.is_ok()) {
    return timeout_error(who_ +
                         " could not send its goodbye to every peer before the close "
                         "deadline; they will see the connection end without one");
  }
  return Status::ok();
}

}  // namespace tidegate::tcp
