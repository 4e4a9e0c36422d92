// The built-in TCP transport (DESIGN.md "Transport"): a full mesh of non-blocking TCP
// connections, `TIDEGATE_TCP_STREAMS` per peer, driven by one epoll set.
//
// How a message travels (frame format in tcp_frame.h):
//  - Each (peer, channel) pair numbers its messages: the k-th isend to a peer on a channel
//    has seq k and fills the peer's k-th irecv on that channel, whichever connection
//    carried it. That keeps the interface's FIFO matching while a message is striped.
//  - Small messages (<= kEagerMaxBytes) are written at once. If the receive is not posted
//    yet the receiver keeps a copy (up to kUnexpectedCapBytes per peer); beyond that it
//    stops reading the connection until the receive is posted (backpressure).
//  - Large messages are announced by an RTS frame carrying their WireHeader; their data is
//    written only after the receiver's RTR frame says the receive is posted. The receiver
//    sends the RTR when the receive is posted, which is usually before the sender is ready,
//    so the rendezvous costs no round trip in pipelined algorithms; and large payloads never
//    sit in a socket in front of other messages. Data is written from the user's buffer with
//    sendmsg() and read with readv() into the user's buffer: no copies.
//  - Every DATA frame carries the message's WireHeader; the receiver checks it against the
//    posted receive before storing a byte. A mismatch or any protocol violation fails the
//    receive and the whole transport (the connection's content can no longer be trusted),
//    and this rank tells every peer with an ABORT frame, so the error reaches them too.
//
// Failure model: the transport fails as a whole (progress() returns the error, pending and
// later transfers fail with it) on abort(), on an ABORT frame from a peer ("rank 2 aborted:
// ..."), on a mismatch or protocol error, and on losing a connection to a peer that had not
// said goodbye (PEER_FAILED "connection to rank X lost (...)", after kAbortGraceMs in which an
// ABORT from any peer wins). close() sends a BYE on every connection, so peers tell a goodbye
// from a crash; messages sent before it still arrive.
// A parked connection is not watched until its receive is posted; the peer's other
// connections (or, with one stream, the engine's deadline) reveal a peer lost meanwhile.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/socket_util.h"
#include "base/transport.h"
#include "transports/tcp/tcp_connect.h"
#include "transports/tcp/tcp_stream.h"

namespace tidegate {

// The factory registered in the transport table (name "tcp").
Status create_tcp_transport(const TransportContext& context, std::unique_ptr<Transport>* transport);

namespace tcp {

// Eager messages a peer may have waiting for their receives before this rank stops reading.
inline constexpr size_t kUnexpectedCapBytes = size_t{32} << 20;
// How long a connection lost without a goodbye waits for another peer's ABORT before it is
// reported (as the ucx transport does): the ABORT carries the root cause.
inline constexpr int64_t kAbortGraceMs = 500;
// A rank answers liveness notices at most this often.
inline constexpr int64_t kLivenessAnswerMs = 500;

// A snapshot of one peer's connections, for tests and diagnostics.
struct TcpPeerStats {
  std::vector<uint64_t> bytes_written;  // per connection, frames included
  size_t unexpected_bytes = 0;          // eager messages waiting for their receives
  size_t parked_streams = 0;            // connections not read until a receive is posted
  size_t announced_messages = 0;        // large messages announced, receive not yet posted
  size_t early_rtrs = 0;                // RTRs received before their sends were posted
  bool said_goodbye = false;            // the peer closed its transport gracefully
};

class TcpTransport final : public Transport, private FrameSink {
 public:
  // Connects to every peer (see tcp_connect.h); the transport is usable on success.
  static Status create(const TransportContext& context, std::unique_ptr<Transport>* out);
  ~TcpTransport() override;

  const char* name() const override { return "tcp"; }
  TransportCapabilities capabilities() const override;
  Status isend(int peer, uint32_t channel, const WireHeader& header, const void* payload,
               size_t bytes, Handle* handle) override;
  Status irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload, size_t bytes,
               Handle* handle) override;
  using Transport::test;
  Status test(Handle handle, bool* done, size_t* payload_bytes) override;
  Status progress(Milliseconds max_wait, bool* activity) override;
  void wake() override;
  std::vector<int> awaited_peers() const override;
  bool tracks_liveness() const override { return true; }
  void send_liveness() override;
  Clock::time_point last_heard(int peer) const override;
  void abort(const Status& reason) override;
  Status close(Deadline deadline) override;

  // Thread-safe; `peer` must be another rank.
  TcpPeerStats peer_stats(int peer) const;

 private:
  struct Op {
    bool is_send = false;
    int peer = 0;
    uint32_t channel = 0;
    uint64_t seq = 0;
    bool done = false;
    Status status;
    WireHeader header;         // send: the header sent; receive: the header expected
    char* data = nullptr;      // the user's payload
    size_t bytes = 0;          // send: payload size; receive: capacity
    size_t length = 0;         // receive: the payload length the sender's header announced
    size_t frames_left = 0;    // send: DATA frames not yet written
    bool data_queued = false;  // send: its DATA frames are queued
    size_t received = 0;       // receive: payload bytes stored
  };
  struct Unexpected {  // an eager message whose receive is not posted yet
    WireHeader wire;
    std::vector<char> data;
    bool complete = false;
  };
  struct Channel {
    uint64_t next_send_seq = 0;
    uint64_t next_recv_seq = 0;
    std::map<uint64_t, Handle> posted;         // receives waiting for data
    std::map<uint64_t, Handle> awaiting_rtr;   // large sends waiting for the receiver's RTR
    std::set<uint64_t> early_rtr;              // RTRs that came before their send was posted
    std::map<uint64_t, WireHeader> announced;  // RTS headers whose receive is not posted yet
    std::map<uint64_t, Unexpected> unexpected;
  };
  struct Peer {
    std::vector<Stream> streams;
    std::unordered_map<uint32_t, Channel> channels;
    std::vector<std::string> abort_text;  // per stream: an ABORT frame's message being read
    std::vector<bool> bye_on_stream;      // per stream: its BYE frame has arrived
    size_t byes = 0;
    size_t unexpected_bytes = 0;
    size_t stripe_rotor = 0;
    Clock::time_point last_heard;  // when a frame last arrived from this peer
    // The peer is closing: it sends nothing new and receives nothing more.
    bool closing() const { return byes > 0; }
    // Every connection delivered its BYE: nothing more will arrive from this peer.
    bool finished() const { return byes == streams.size(); }
  };

  TcpTransport(const TransportContext& context, int streams);
  Status start(tcp::Links links);

  // ---- tcp_transport.cc: posting and the event loop
  Status check_peer_usable(int peer, bool sending) const;
  Handle new_op(Op op);
  void complete(Op& op, Status status);
  Stream& least_loaded_stream(Peer& peer);
  void queue_data_frames(Handle handle, Op& op);
  void queue_control(int peer, FrameType type, uint32_t channel, uint64_t seq,
                     const WireHeader* wire, uint64_t total);
  void flush_peer(int peer);
  int wait_for_events(std::unique_lock<std::mutex>& lock, int timeout_ms);
  void service(Stream& stream, bool readable, bool writable);
  void update_interest(Stream& stream);

  // ---- tcp_receive.cc: the FrameSink and message matching
  Status on_frame_start(Stream& stream, const FrameHeader& frame, const WireHeader& wire,
                        PayloadTarget* target, bool* park) override;
  Status on_frame_end(Stream& stream, const FrameHeader& frame, const WireHeader& wire) override;
  void on_frame_sent(Handle send_op) override;
  Status start_data(Peer& peer, int peer_rank, const FrameHeader& frame, const WireHeader& wire,
                    PayloadTarget* target, bool* park);
  Status start_rts(int peer_rank, const FrameHeader& frame, const WireHeader& wire);
  Status end_data(Peer& peer, const FrameHeader& frame);
  Status end_rtr(int peer_rank, const FrameHeader& frame);
  Status end_abort(Stream& stream, const FrameHeader& frame);
  Status end_bye(Stream& stream);
  Status match_posted_receive(Handle handle, Op& op);
  // Completes `op` with an eager message that arrived before it and frees the copy.
  void copy_unexpected(Peer& peer, Channel& ch, std::map<uint64_t, Unexpected>::iterator message,
                       Op& op);
  void resume_parked(int peer);
  // Sends PING frames to every peer still open (mutex held); answer_liveness() does so only
  // when none went out in the last kLivenessAnswerMs.
  void ping_peers();
  void answer_liveness();

  // ---- tcp_shutdown.cc: failure, abort and close
  // Fails the transport with `status` (the first failure wins) and every pending transfer;
  // with `tell_peers`, first sends every peer an ABORT frame carrying it.
  void fail(const Status& status, bool tell_peers);
  void send_abort_frames(const Status& status);
  Status flush_all_until(Deadline deadline);
  // A connection lost without a goodbye: suspected first, reported by
  // settle_suspected_failure() once kAbortGraceMs passed without an ABORT from any peer.
  void handle_stream_closed(Stream& stream);
  void settle_suspected_failure();
  size_t pending_ops(int peer) const;
  void release_connections();

  const int rank_;
  const int size_;
  const int streams_per_peer_;
  const int64_t timeout_ms_;
  const std::string who_;  // "rank 3", for messages

  std::vector<Peer> peers_;
  UniqueFd epoll_;
  UniqueFd wake_fd_;

  // Guards everything below and the streams: the progress thread holds it except while it
  // blocks in epoll_wait(), so abort() from another thread can act at any time.
  mutable std::mutex mutex_;
  std::unordered_map<Handle, Op> ops_;
  Handle next_handle_ = 1;
  Status failed_;
  Status suspected_;  // a lost connection, reported at suspected_until_ unless an ABORT wins
  Clock::time_point suspected_until_;
  bool abort_sent_ = false;
  bool closed_ = false;
  bool activity_ = false;
  Clock::time_point last_ping_sent_;
  bool ping_answer_due_ = false;  // a PING arrived: answer once the events are handled
  size_t frames_read_ = 0;        // frames started in the current receive() (service())
  size_t pings_read_ = 0;
};

}  // namespace tcp
}  // namespace tidegate
