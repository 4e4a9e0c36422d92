// One TCP connection to a peer: a queue of outgoing frames written with sendmsg() straight
// from the user's buffers, and a receive state machine that parses frame prefixes from a
// small inbox and then reads each payload with readv() directly into the buffer the
// transport names for it. The stream knows frames, not messages: what a frame means (which
// receive it fills, whether it must wait) is decided by the FrameSink, i.e. the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "base/socket_util.h"
#include "base/status.h"
#include "base/transport.h"
#include "transports/tcp/tcp_frame.h"

namespace tidegate::tcp {

class Stream;

// One frame waiting to be written: its encoded prefix and an optional payload that is either
// the user's memory (DATA; must stay valid until the frame is written) or owned (ABORT).
struct OutFrame {
  unsigned char prefix[kMaxFramePrefixBytes];
  size_t prefix_bytes = 0;
  const char* payload = nullptr;
  size_t payload_bytes = 0;
  std::string owned_payload;      // used when payload is nullptr
  size_t sent = 0;                // bytes of prefix + payload already written
  Transport::Handle send_op = 0;  // credited once the whole frame is written (0 = none)
  bool liveness = false;          // a PING: writing it is no progress of any transfer

  size_t total_bytes() const { return prefix_bytes + payload_bytes; }
  const char* payload_data() const { return payload != nullptr ? payload : owned_payload.data(); }
};

// Where the payload of the frame being received goes.
struct PayloadTarget {
  char* dest = nullptr;
  size_t bytes = 0;
};

// The transport's side of the receive state machine.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // A frame prefix arrived. Either names where its `frame.length` payload bytes go, or sets
  // *park to stop reading this stream until resume() (backpressure). An error fails the
  // transport: the stream content cannot be trusted any more.
  virtual Status on_frame_start(Stream& stream, const FrameHeader& frame, const WireHeader& wire,
                                PayloadTarget* target, bool* park) = 0;
  // The frame started last on this stream has been received completely.
  virtual Status on_frame_end(Stream& stream, const FrameHeader& frame, const WireHeader& wire) = 0;
  // A frame carrying `send_op` has been written completely.
  virtual void on_frame_sent(Transport::Handle send_op) = 0;
};

class Stream {
 public:
  Stream(int peer, int index, UniqueFd fd);

  int fd() const { return fd_.get(); }
  int peer() const { return peer_; }
  int index() const { return index_; }

  // ---- sending ----
  // Appends a frame (FIFO with the other data frames of this stream).
  void push_back(OutFrame frame);
  // Puts a small control frame (RTS, RTR) ahead of every data frame not yet started, so
  // that a rendezvous never waits behind megabytes of unrelated data.
  void push_control(OutFrame frame);
  bool has_output() const { return !out_.empty(); }
  size_t queued_bytes() const { return queued_bytes_; }
  // Writes what the socket accepts now. *moved is set when any byte of a frame other than a
  // liveness notice was written.
  Status flush(FrameSink& sink, bool* moved);
  // Blocking flush (poll) until the queue is empty or the deadline passes (TIMEOUT).
  Status flush_until(FrameSink& sink, Deadline deadline);
  // Drops queued frames not yet started; a partially written frame stays (the stream would
  // lose frame alignment without its remaining bytes).
  void drop_unstarted();
  // Drops everything, even a partial frame; the stream can then never be written again.
  void abandon_output();
  bool output_broken() const { return output_broken_; }
  uint64_t bytes_written() const { return bytes_written_; }

  // ---- receiving ----
  // Reads and dispatches frames until the socket has no more bytes, about `budget` bytes
  // were read, the stream is parked or the peer closed. *moved is set when bytes arrived.
  Status receive(FrameSink& sink, size_t budget, bool* moved);
  bool parked() const { return state_ == State::kParked; }
  // Offers the parked frame to the sink again (its receive may be posted now).
  Status resume(FrameSink& sink);
  const FrameHeader& current_frame() const { return frame_; }
  // The peer closed its side (EOF) or the connection broke; lost_errno() is 0 for an EOF.
  bool peer_closed() const { return state_ == State::kClosed; }
  int lost_errno() const { return lost_errno_; }
  // True while a frame's payload is partly received (an EOF now loses data).
  bool mid_receive() const { return state_ == State::kPayload || in_end_ > in_begin_; }

  // epoll interest currently registered for this stream (kept by the transport).
  uint32_t armed_events = 0;

 private:
  enum class State { kPrefix, kPayload, kParked, kClosed };

  // Parses one frame prefix from the inbox if complete; *parsed says whether it was.
  Status parse_prefix(FrameSink& sink, bool* parsed);
  Status start_frame(FrameSink& sink);
  Status finish_frame(FrameSink& sink);
  // Reads more bytes into the inbox (or, in kPayload, the payload); false when none now.
  bool read_into_inbox(size_t* got);
  bool read_payload(size_t budget, size_t* got);
  void note_closed(int saved_errno);

  int peer_;
  int index_;
  UniqueFd fd_;

  std::deque<OutFrame> out_;
  size_t queued_bytes_ = 0;
  uint64_t bytes_written_ = 0;
  bool output_broken_ = false;

  State state_ = State::kPrefix;
  std::unique_ptr<unsigned char[]> inbox_;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  FrameHeader frame_;
  WireHeader wire_;
  char* dest_ = nullptr;
  size_t remaining_ = 0;
  int lost_errno_ = 0;
};

}  // namespace tidegate::tcp
