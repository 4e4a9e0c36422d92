// TcpTransport's receive side: what each arriving frame means (the FrameSink callbacks) and
// how a posted receive finds its message, whether that message came before or after it.
#include <cstring>

#include "transports/tcp/tcp_transport.h"

namespace tidegate::tcp {

namespace {
// Bounds on per-channel bookkeeping a peer can make this rank keep; an authenticated but
// misbehaving peer hits these long before memory runs out.
constexpr size_t kMaxAnnouncedMessages = 1 << 16;
constexpr size_t kMaxEarlyRtrs = 1 << 16;

std::string rank_text(int rank) { return "rank " + std::to_string(rank); }
}  // namespace

Status TcpTransport::on_frame_start(Stream& stream, const FrameHeader& frame,
                                    const WireHeader& wire, PayloadTarget* target, bool* park) {
  Peer& peer = peers_[stream.peer()];
  ++frames_read_;
  if (frame.type == FrameType::kPing) ++pings_read_;
  switch (frame.type) {
    case FrameType::kData:
      return start_data(peer, stream.peer(), frame, wire, target, park);
    case FrameType::kRts:
      return start_rts(stream.peer(), frame, wire);
    case FrameType::kAbort: {
      std::string& text = peer.abort_text[stream.index()];
      text.assign(frame.length, '\0');
      target->dest = text.data();
      target->bytes = frame.length;
      return Status::ok();
    }
    case FrameType::kRtr:
    case FrameType::kBye:
    case FrameType::kPing:
      return Status::ok();  // nothing follows their prefix
  }
  return internal_error("unhandled frame type");
}

Status TcpTransport::on_frame_end(Stream& stream, const FrameHeader& frame, const WireHeader&) {
  Peer& peer = peers_[stream.peer()];
  peer.last_heard = Clock::now();
  switch (frame.type) {
    case FrameType::kPing:
      ping_answer_due_ = true;  // answered after the events: not from inside a receive
      return Status::ok();
    case FrameType::kData:
      return end_data(peer, frame);
    case FrameType::kRtr:
      return end_rtr(stream.peer(), frame);
    case FrameType::kAbort:
      return end_abort(stream, frame);
    case FrameType::kBye:
      return end_bye(stream);
    case FrameType::kRts:
      return Status::ok();  // handled at its start
  }
  return internal_error("unhandled frame type");
}

void TcpTransport::on_frame_sent(Handle send_op) {
  auto it = ops_.find(send_op);
  if (it == ops_.end() || it->second.done) return;  // failed (and maybe reported) already
  Op& op = it->second;
  if (--op.frames_left == 0 && op.data_queued) complete(op, Status::ok());
}

Status TcpTransport::start_data(Peer& peer, int from, const FrameHeader& frame,
                                const WireHeader& wire, PayloadTarget* target, bool* park) {
  if (frame.total != wire.payload_bytes) {
    return protocol_error(rank_text(from) + " sent a " + describe_frame(frame) +
                          " whose header announces " + std::to_string(wire.payload_bytes) +
                          " bytes");
  }
  Channel& ch = peer.channels[frame.channel];
  if (ch.unexpected.count(frame.seq) > 0) {
    return protocol_error(rank_text(from) +
                          " sent a second frame of a small message: " + describe_frame(frame));
  }
  auto posted = ch.posted.find(frame.seq);
  if (posted != ch.posted.end()) {
    Op& op = ops_.at(posted->second);
    // Before storing a byte: is this the message the receive expects?
    Status matches = check_wire_header(op.header, wire, rank_, from);
    if (!matches.is_ok()) return matches;
    op.length = wire.payload_bytes;                // the check kept it within the receive's bound
    if (frame.offset + frame.length > op.bytes) {  // cannot pass the check above; kept cheap
      return protocol_error(rank_text(from) + " sent a " + describe_frame(frame) +
                            " beyond the receive buffer of " + std::to_string(op.bytes));
    }
    target->dest = op.data + frame.offset;
    target->bytes = frame.length;
    return Status::ok();
  }
  if (frame.seq < ch.next_recv_seq) {
    return protocol_error(rank_text(from) + " sent a " + describe_frame(frame) +
                          " for a message that was already received");
  }
  if (frame.total > kEagerMaxBytes || frame.offset != 0 || frame.length != frame.total) {
    return protocol_error(rank_text(from) + " sent a " + describe_frame(frame) +
                          " before this rank asked for it (RTR)");
  }
  if (peer.unexpected_bytes + frame.total > kUnexpectedCapBytes) {
    *park = true;  // backpressure: read on once the receive is posted
    return Status::ok();
  }
  Unexpected& message = ch.unexpected[frame.seq];
  message.wire = wire;
  message.data.resize(frame.total);
  peer.unexpected_bytes += frame.total;
  target->dest = message.data.data();
  target->bytes = frame.length;
  return Status::ok();
}

Status TcpTransport::start_rts(int from, const FrameHeader& frame, const WireHeader& wire) {
  if (frame.total != wire.payload_bytes) {
    return protocol_error(rank_text(from) + " sent an " + describe_frame(frame) +
                          " whose header announces " + std::to_string(wire.payload_bytes) +
                          " bytes");
  }
  Channel& ch = peers_[from].channels[frame.channel];
  auto posted = ch.posted.find(frame.seq);
  if (posted != ch.posted.end()) {
    // The RTR went out when the receive was posted; only the header is left to judge.
    Op& op = ops_.at(posted->second);
    TG_RETURN_IF_ERROR(check_wire_header(op.header, wire, rank_, from));
    op.length = wire.payload_bytes;
    return Status::ok();
  }
  if (frame.seq < ch.next_recv_seq) return Status::ok();  // its data overtook it: received
  if (ch.announced.size() >= kMaxAnnouncedMessages) {
    return protocol_error(rank_text(from) + " announced more than " +
                          std::to_string(kMaxAnnouncedMessages) + " messages on channel " +
                          std::to_string(frame.channel) + " that this rank never received");
  }
  ch.announced[frame.seq] = wire;
  return Status::ok();
}

Status TcpTransport::end_data(Peer& peer, const FrameHeader& frame) {
  Channel& ch = peer.channels[frame.channel];
  auto early = ch.unexpected.find(frame.seq);
  if (early != ch.unexpected.end() && !early->second.complete) {
    early->second.complete = true;
    auto posted = ch.posted.find(frame.seq);
    if (posted == ch.posted.end()) return Status::ok();  // waits for its irecv
    // The receive was posted (and its header checked) while the payload was arriving.
    Op& op = ops_.at(posted->second);
    ch.posted.erase(posted);
    copy_unexpected(peer, ch, early, op);
    return Status::ok();
  }
  auto posted = ch.posted.find(frame.seq);
  TG_CHECK_INTERNAL(posted != ch.posted.end());
  Op& op = ops_.at(posted->second);
  op.received += frame.length;
  if (op.received > op.length) {
    return protocol_error(rank_text(op.peer) +
                          " sent more bytes than its message has: " + describe_frame(frame));
  }
  if (op.received == op.length) {
    ch.posted.erase(posted);
    complete(op, Status::ok());
  }
  return Status::ok();
}

Status TcpTransport::end_rtr(int from, const FrameHeader& frame) {
  Channel& ch = peers_[from].channels[frame.channel];
  auto waiting = ch.awaiting_rtr.find(frame.seq);
  if (waiting != ch.awaiting_rtr.end()) {
    const Handle handle = waiting->second;
    ch.awaiting_rtr.erase(waiting);
    queue_data_frames(handle, ops_.at(handle));
    return Status::ok();  // service() flushes the peer's streams after this read
  }
  if (frame.seq >= ch.next_send_seq) {  // the receiver is ahead of us: remember its RTR
    if (ch.early_rtr.size() >= kMaxEarlyRtrs) {
      return protocol_error(rank_text(from) + " sent more than " + std::to_string(kMaxEarlyRtrs) +
                            " RTRs for messages this rank has not sent");
    }
    ch.early_rtr.insert(frame.seq);
  }
  // Otherwise the message went out eagerly: the receiver's header check reports the mismatch.
  return Status::ok();
}

Status TcpTransport::end_abort(Stream& stream, const FrameHeader& frame) {
  std::string text = std::move(peers_[stream.peer()].abort_text[stream.index()]);
  uint32_t code = frame.status_code;
  if (code < TIDEGATE_ERR_INVALID_ARGUMENT || code > TIDEGATE_ERR_INTERNAL)
    code = TIDEGATE_ERR_ABORTED;
  fail(Status(static_cast<tidegate_status_t>(code), rank_text(stream.peer()) + " aborted: " + text),
       false);
  return failed_;
}

Status TcpTransport::end_bye(Stream& stream) {
  const int from = stream.peer();
  Peer& peer = peers_[from];
  if (peer.bye_on_stream[stream.index()]) {
    return protocol_error(rank_text(from) + " said goodbye twice on one connection");
  }
  peer.bye_on_stream[stream.index()] = true;
  ++peer.byes;
  // Messages sent before the goodbye may still be on the other connections.
  const size_t pending = peer.finished() ? pending_ops(from) : 0;
  if (pending == 0) return Status::ok();
  fail(peer_failed(rank_text(from) + " closed its transport while " + std::to_string(pending) +
                   " transfer(s) of " + who_ +
                   " with it were pending: the ranks did not post "
                   "the same operations"),
       false);
  return failed_;
}

void TcpTransport::copy_unexpected(Peer& peer, Channel& ch,
                                   std::map<uint64_t, Unexpected>::iterator message, Op& op) {
  const std::vector<char>& data = message->second.data;
  if (!data.empty()) std::memcpy(op.data, data.data(), data.size());
  op.length = data.size();
  peer.unexpected_bytes -= data.size();
  ch.unexpected.erase(message);
  complete(op, Status::ok());
}

Status TcpTransport::match_posted_receive(Handle handle, Op& op) {
  Peer& peer = peers_[op.peer];
  Channel& ch = peer.channels[op.channel];
  auto announced = ch.announced.find(op.seq);
  if (announced != ch.announced.end()) {
    const WireHeader wire = announced->second;
    ch.announced.erase(announced);
    Status matches = check_wire_header(op.header, wire, rank_, op.peer);
    if (!matches.is_ok()) return matches;
    op.length = wire.payload_bytes;
  }
  auto early = ch.unexpected.find(op.seq);
  if (early != ch.unexpected.end()) {
    Status matches = check_wire_header(op.header, early->second.wire, rank_, op.peer);
    if (!matches.is_ok()) return matches;
    op.length = early->second.wire.payload_bytes;
    if (!early->second.complete) {
      ch.posted[op.seq] = handle;  // end_data() copies it when the rest arrives
      return Status::ok();
    }
    copy_unexpected(peer, ch, early, op);
    resume_parked(op.peer);  // buffer space was freed
    return Status::ok();
  }
  ch.posted[op.seq] = handle;
  // A closing peer has no large send left (it closed with none pending): no RTR to it. A
  // bounded receive asks when its bound is large; a sender whose message turns out small has
  // sent it eagerly and drops the RTR (tcp_transport.cc, isend).
  if (op.header.payload_bytes > kEagerMaxBytes && !peer.closing()) {
    queue_control(op.peer, FrameType::kRtr, op.channel, op.seq, nullptr, 0);
  }
  resume_parked(op.peer);
  return Status::ok();
}

void TcpTransport::resume_parked(int peer) {
  for (Stream& stream : peers_[peer].streams) {
    if (!stream.parked() || !failed_.is_ok()) continue;
    Status resumed = stream.resume(*this);
    if (!resumed.is_ok()) {
      fail(resumed, true);
      return;
    }
    if (!stream.parked()) service(stream, true, false);
  }
}

}  // namespace tidegate::tcp
