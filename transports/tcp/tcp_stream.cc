#include "transports/tcp/tcp_stream.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tidegate::tcp {

namespace {
// The inbox holds frame prefixes and small payloads that arrive with them; big payloads
// bypass it. 64 KiB lets one recv() pick up many small frames at once.
constexpr size_t kInboxBytes = size_t{64} << 10;
constexpr int kMaxIovecs = 64;
}  // namespace

Stream::Stream(int peer, int index, UniqueFd fd)
    : peer_(peer), index_(index), fd_(std::move(fd)), inbox_(new unsigned char[kInboxBytes]) {}

// ---------------------------------------------------------------- sending

void Stream::push_back(OutFrame frame) {
  queued_bytes_ += frame.total_bytes();
  out_.push_back(std::move(frame));
}

void Stream::push_control(OutFrame frame) {
  queued_bytes_ += frame.total_bytes();
  // Frames on one stream may be reordered freely except a started one: the receiver matches
  // by (channel, seq) and offset, not by arrival order.
  auto position = out_.begin();
  if (!out_.empty() && out_.front().sent > 0) ++position;
  out_.insert(position, std::move(frame));
}

Status Stream::flush(FrameSink& sink, bool* moved) {
  while (!out_.empty()) {
    iovec iov[kMaxIovecs];
    int count = 0;
    for (auto it = out_.begin(); it != out_.end() && count + 2 <= kMaxIovecs; ++it) {
      size_t skip = it->sent;
      if (skip < it->prefix_bytes) {
        iov[count++] = {it->prefix + skip, it->prefix_bytes - skip};
        skip = 0;
      } else {
        skip -= it->prefix_bytes;
      }
      if (it->payload_bytes > skip) {
        iov[count++] = {const_cast<char*>(it->payload_data()) + skip, it->payload_bytes - skip};
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t written = ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      return peer_failed(std::string("send failed: ") + std::strerror(errno));
    }
    size_t left = static_cast<size_t>(written);
    queued_bytes_ -= left;
    bytes_written_ += left;
    while (left > 0) {
      OutFrame& head = out_.front();
      if (!head.liveness) *moved = true;
      const size_t unsent = head.total_bytes() - head.sent;
      if (left < unsent) {
        head.sent += left;
        break;
      }
      left -= unsent;
      const Transport::Handle op = head.send_op;
      out_.pop_front();
      if (op != 0) sink.on_frame_sent(op);
    }
  }
  return Status::ok();
}

Status Stream::flush_until(FrameSink& sink, Deadline deadline) {
  while (true) {
    bool moved = false;
    TG_RETURN_IF_ERROR(flush(sink, &moved));
    if (out_.empty()) return Status::ok();
    pollfd pfd{fd_.get(), POLLOUT, 0};
    int ready = ::poll(&pfd, 1, deadline.poll_timeout_ms());
    if (ready < 0 && errno != EINTR) return system_error("poll()", errno);
    if (ready == 0 && deadline.passed()) {
      return timeout_error("could not flush " + std::to_string(queued_bytes_) + " bytes to rank " +
                           std::to_string(peer_) + " before the deadline");
    }
  }
}

void Stream::drop_unstarted() {
  const bool keep_head = !out_.empty() && out_.front().sent > 0;
  while (out_.size() > (keep_head ? 1u : 0u)) {
    queued_bytes_ -= out_.back().total_bytes() - out_.back().sent;
    out_.pop_back();
  }
}

void Stream::abandon_output() {
  if (!out_.empty() && out_.front().sent > 0) output_broken_ = true;
  out_.clear();
  queued_bytes_ = 0;
}

// ---------------------------------------------------------------- receiving

void Stream::note_closed(int saved_errno) {
  state_ = State::kClosed;
  lost_errno_ = saved_errno;
}

bool Stream::read_into_inbox(size_t* got) {
  if (in_begin_ > 0) {  // keep the partial prefix at the front; it is at most 112 bytes
    std::memmove(inbox_.get(), inbox_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  while (true) {
    ssize_t n = ::recv(fd_.get(), inbox_.get() + in_end_, kInboxBytes - in_end_, MSG_DONTWAIT);
    if (n > 0) {
      in_end_ += static_cast<size_t>(n);
      *got = static_cast<size_t>(n);
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    note_closed(n == 0 ? 0 : errno);
    return false;
  }
}

bool Stream::read_payload(size_t budget, size_t* got) {
  // The payload goes straight to its destination; only the next frame's prefix (never its
  // payload) may land in the inbox, so no payload byte of a big frame is copied twice.
  iovec iov[2] = {{dest_, std::min(remaining_, budget)}, {inbox_.get(), kMaxFramePrefixBytes}};
  const bool whole = iov[0].iov_len == remaining_;
  while (true) {
    ssize_t n = ::readv(fd_.get(), iov, whole ? 2 : 1);
    if (n > 0) {
      const size_t bytes = static_cast<size_t>(n);
      const size_t to_payload = std::min(bytes, remaining_);
      dest_ += to_payload;
      remaining_ -= to_payload;
      in_begin_ = 0;
      in_end_ = bytes - to_payload;
      *got = bytes;
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    note_closed(n == 0 ? 0 : errno);
    return false;
  }
}

Status Stream::parse_prefix(FrameSink& sink, bool* parsed) {
  *parsed = false;
  const size_t available = in_end_ - in_begin_;
  if (available < kFrameHeaderBytes) return Status::ok();
  const unsigned char* p = inbox_.get() + in_begin_;
  FrameHeader frame;
  TG_RETURN_IF_ERROR(decode_frame_header(p, peer_, &frame));
  const size_t prefix =
      frame_has_wire_header(frame.type) ? kMaxFramePrefixBytes : kFrameHeaderBytes;
  if (available < prefix) return Status::ok();
  frame_ = frame;
  wire_ =
      frame_has_wire_header(frame.type) ? decode_wire_header(p + kFrameHeaderBytes) : WireHeader{};
  in_begin_ += prefix;
  *parsed = true;
  return start_frame(sink);
}

Status Stream::start_frame(FrameSink& sink) {
  PayloadTarget target;
  bool park = false;
  TG_RETURN_IF_ERROR(sink.on_frame_start(*this, frame_, wire_, &target, &park));
  if (park) {
    state_ = State::kParked;
    return Status::ok();
  }
  TG_CHECK_INTERNAL(target.bytes == frame_.length && (target.dest != nullptr || target.bytes == 0));
  dest_ = target.dest;
  remaining_ = target.bytes;
  state_ = State::kPayload;
  if (remaining_ == 0) return finish_frame(sink);
  return Status::ok();
}

Status Stream::finish_frame(FrameSink& sink) {
  state_ = State::kPrefix;
  return sink.on_frame_end(*this, frame_, wire_);
}

Status Stream::resume(FrameSink& sink) {
  if (state_ != State::kParked) return Status::ok();
  state_ = State::kPrefix;
  return start_frame(sink);
}

Status Stream::receive(FrameSink& sink, size_t budget, bool* moved) {
  size_t received = 0;
  while (received < budget) {
    size_t got = 0;
    if (state_ == State::kPrefix) {
      bool parsed = false;
      TG_RETURN_IF_ERROR(parse_prefix(sink, &parsed));
      if (parsed) continue;
      if (!read_into_inbox(&got)) return Status::ok();
    } else if (state_ == State::kPayload) {
      const size_t buffered = in_end_ - in_begin_;
      if (buffered > 0) {  // small payloads that arrived with their prefix
        const size_t take = std::min(buffered, remaining_);
        std::memcpy(dest_, inbox_.get() + in_begin_, take);
        in_begin_ += take;
        dest_ += take;
        remaining_ -= take;
      } else if (!read_payload(budget - received, &got)) {
        return Status::ok();
      }
      if (remaining_ == 0) TG_RETURN_IF_ERROR(finish_frame(sink));
    } else {
      return Status::ok();  // parked or closed
    }
    received += got;
    if (got > 0) *moved = true;
  }
  return Status::ok();
}

}  // namespace tidegate::tcp
