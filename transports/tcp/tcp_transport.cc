// TcpTransport: construction, posting sends and receives, and the epoll event loop.
#include "transports/tcp/tcp_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "base/auth.h"
#include "base/store.h"

namespace tidegate {

Status create_tcp_transport(const TransportContext& context,
                            std::unique_ptr<Transport>* transport) {
  return tcp::TcpTransport::create(context, transport);
}

namespace tcp {

namespace {
// Bytes one stream may read per readiness event before the loop moves to the next stream,
// so that one fast connection cannot starve the others.
constexpr size_t kReadBudgetBytes = size_t{8} << 20;
constexpr int kMaxEvents = 64;
constexpr size_t kPageBytes = 4096;
}  // namespace

TcpTransport::TcpTransport(const TransportContext& ctx, int streams)
    : rank_(ctx.rank),
      size_(ctx.size),
      streams_per_peer_(streams),
      timeout_ms_(ctx.config->timeout_ms()),
      who_("rank " + std::to_string(ctx.rank)) {}

TcpTransport::~TcpTransport() = default;

Status TcpTransport::create(const TransportContext& ctx, std::unique_ptr<Transport>* out) {
  TG_CHECK_ARG(ctx.config != nullptr && ctx.store != nullptr && ctx.secret != nullptr,
               "tcp transport: the context needs a config, a store and a secret");
  TG_CHECK_ARG(ctx.size >= 1 && ctx.rank >= 0 && ctx.rank < ctx.size,
               "tcp transport: rank must be in [0, size)");
  const int streams = ctx.config->tcp_streams();
  Links links;
  TG_RETURN_IF_ERROR(connect_all_peers(ctx, streams, &links));
  std::unique_ptr<TcpTransport> transport(new TcpTransport(ctx, streams));
  TG_RETURN_IF_ERROR(transport->start(std::move(links)));
  *out = std::move(transport);
  return Status::ok();
}

Status TcpTransport::start(Links links) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return system_error("epoll_create1()", errno);
  wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_.valid()) return system_error("eventfd()", errno);
  epoll_event wake_event{};
  wake_event.events = EPOLLIN;
  wake_event.data.ptr = nullptr;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &wake_event) != 0)
    return system_error("epoll_ctl(wake)", errno);

  peers_.resize(static_cast<size_t>(size_));
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[peer];
    p.streams.reserve(links[peer].size());
    for (size_t s = 0; s < links[peer].size(); ++s) {
      p.streams.emplace_back(peer, static_cast<int>(s), std::move(links[peer][s]));
    }
    p.abort_text.resize(p.streams.size());
    p.bye_on_stream.assign(p.streams.size(), false);
    for (Stream& stream : p.streams) update_interest(stream);
  }
  return Status::ok();
}

TransportCapabilities TcpTransport::capabilities() const {
  TransportCapabilities caps;
  caps.host_memory = true;
  return caps;
}

TcpPeerStats TcpTransport::peer_stats(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  TcpPeerStats stats;
  const Peer& p = peers_.at(static_cast<size_t>(peer));
  for (const Stream& stream : p.streams) {
    stats.bytes_written.push_back(stream.bytes_written());
    if (stream.parked()) ++stats.parked_streams;
  }
  stats.unexpected_bytes = p.unexpected_bytes;
  stats.said_goodbye = p.finished();
  for (const auto& [channel, state] : p.channels) {
    stats.announced_messages += state.announced.size();
    stats.early_rtrs += state.early_rtr.size();
  }
  return stats;
}

Status TcpTransport::check_peer_usable(int peer, bool sending) const {
  const char* what = sending ? "send to" : "receive from";
  if (closed_) return invalid_argument(std::string(what) + " on a closed tcp transport");
  if (!failed_.is_ok()) return failed_;
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return invalid_argument(std::string(what) + ": peer " + std::to_string(peer) +
                            " is not another rank of this communicator of " +
                            std::to_string(size_) + " (" + who_ + ")");
  }
  // Receives stay allowed from a closing peer: its last messages may be waiting here.
  if (sending && peers_[peer].closing()) {
    return peer_failed("rank " + std::to_string(peer) + " has closed its transport; " + who_ +
                       " cannot " + what + " it");
  }
  return Status::ok();
}

Transport::Handle TcpTransport::new_op(Op op) {
  const Handle handle = next_handle_++;
  ops_.emplace(handle, std::move(op));
  return handle;
}

void TcpTransport::complete(Op& op, Status status) {
  op.done = true;
  op.status = std::move(status);
  activity_ = true;
}

Status TcpTransport::isend(int peer, uint32_t channel, const WireHeader& header,
                           const void* payload, size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_peer_usable(peer, true));
  TG_CHECK_ARG(payload != nullptr || bytes == 0, "isend: null payload with a non-zero size");
  Channel& ch = peers_[peer].channels[channel];
  Op op;
  op.is_send = true;
  op.peer = peer;
  op.channel = channel;
  op.seq = ch.next_send_seq++;
  op.header = header;
  // The transport knows who sends and how much: stamping these keeps the receiver's check
  // about the message that is really on the wire.
  op.header.sender_rank = static_cast<uint32_t>(rank_);
  op.header.payload_bytes = bytes;
  op.data = const_cast<char*>(static_cast<const char*>(payload));
  op.bytes = bytes;
  const Handle h = new_op(std::move(op));
  Op& posted = ops_.at(h);
  if (bytes <= kEagerMaxBytes) {
    queue_data_frames(h, posted);
    // An RTR for an eager message means the receiver expects a large one: its header check
    // will report the mismatch; the RTR itself is moot.
    ch.early_rtr.erase(posted.seq);
  } else {
    queue_control(peer, FrameType::kRts, channel, posted.seq, &posted.header, bytes);
    if (ch.early_rtr.erase(posted.seq) > 0) {
      queue_data_frames(h, posted);
    } else {
      ch.awaiting_rtr[posted.seq] = h;
    }
  }
  flush_peer(peer);
  *handle = h;
  return Status::ok();
}

Stream& TcpTransport::least_loaded_stream(Peer& peer) {
  Stream* best = &peer.streams.front();
  for (Stream& s : peer.streams) {
    if (s.queued_bytes() < best->queued_bytes()) best = &s;
  }
  return *best;
}

void TcpTransport::queue_data_frames(Handle handle, Op& op) {
  Peer& peer = peers_[op.peer];
  const size_t streams = peer.streams.size();
  const size_t stripes = std::clamp<size_t>(op.bytes / kMinStripeBytes, 1, streams);
  size_t stripe_bytes = (op.bytes + stripes - 1) / stripes;
  stripe_bytes = (stripe_bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  FrameHeader frame;
  frame.type = FrameType::kData;
  frame.channel = op.channel;
  frame.seq = op.seq;
  frame.total = op.bytes;
  size_t offset = 0;
  for (size_t stripe = 0; stripe < stripes && (offset < op.bytes || stripe == 0); ++stripe) {
    Stream& stream = stripes == 1 ? least_loaded_stream(peer)
                                  : peer.streams[(peer.stripe_rotor + stripe) % streams];
    const size_t stripe_end = std::min(op.bytes, offset + stripe_bytes);
    do {  // at least one frame, so that a zero-byte message is sent too
      OutFrame out;
      frame.offset = offset;
      frame.length = std::min(kMaxFramePayloadBytes, stripe_end - offset);
      out.prefix_bytes = encode_frame_prefix(frame, &op.header, out.prefix);
      out.payload = op.data + offset;
      out.payload_bytes = frame.length;
      out.send_op = handle;
      stream.push_back(std::move(out));
      ++op.frames_left;
      offset += frame.length;
    } while (offset < stripe_end);
  }
  peer.stripe_rotor = (peer.stripe_rotor + stripes) % streams;
  op.data_queued = true;
}

void TcpTransport::queue_control(int peer, FrameType type, uint32_t channel, uint64_t seq,
                                 const WireHeader* wire, uint64_t total) {
  FrameHeader frame;
  frame.type = type;
  frame.channel = channel;
  frame.seq = seq;
  frame.total = total;
  OutFrame out;
  out.prefix_bytes = encode_frame_prefix(frame, wire, out.prefix);
  out.liveness = type == FrameType::kPing;
  least_loaded_stream(peers_[peer]).push_control(std::move(out));
}

Status TcpTransport::irecv(int peer, uint32_t channel, const WireHeader& expected, void* payload,
                           size_t bytes, Handle* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  TG_RETURN_IF_ERROR(check_peer_usable(peer, false));
  TG_CHECK_ARG(payload != nullptr || bytes == 0, "irecv: null payload with a non-zero capacity");
  TG_CHECK_ARG(expected.payload_bytes <= bytes,
               "irecv: expected.payload_bytes (" + std::to_string(expected.payload_bytes) +
                   ") exceeds the buffer capacity (" + std::to_string(bytes) + ")");
  Op op;
  op.peer = peer;
  op.channel = channel;
  op.seq = peers_[peer].channels[channel].next_recv_seq++;
  op.header = expected;
  op.data = static_cast<char*>(payload);
  op.bytes = bytes;
  const Handle h = new_op(std::move(op));
  Op& posted = ops_.at(h);
  Status matched = match_posted_receive(h, posted);
  if (!matched.is_ok()) {
    fail(matched, true);
  } else if (!posted.done && peers_[peer].finished()) {
    peers_[peer].channels[channel].posted.erase(posted.seq);
    complete(posted,
             peer_failed("rank " + std::to_string(peer) +
                         " closed its transport without "
                         "sending this message: the ranks did not post the same operations"));
  }
  flush_peer(peer);
  *handle = h;
  return Status::ok();
}

Status TcpTransport::test(Handle handle, bool* done, size_t* payload_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ops_.find(handle);
  if (it == ops_.end()) {
    return invalid_argument("test: unknown tcp transport handle " + std::to_string(handle) +
                            " (already reported done?)");
  }
  *done = it->second.done;
  if (!it->second.done) return Status::ok();
  if (payload_bytes != nullptr)
    *payload_bytes = it->second.is_send ? it->second.bytes : it->second.length;
  Status status = std::move(it->second.status);
  ops_.erase(it);
  return status;
}

void TcpTransport::flush_peer(int peer) {
  if (!failed_.is_ok() || closed_) return;
  for (Stream& stream : peers_[peer].streams) {
    if (stream.has_output()) service(stream, false, true);
    if (!failed_.is_ok()) return;
  }
}

void TcpTransport::wake() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
  (void)ignored;
}

std::vector<int> TcpTransport::awaited_peers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> peers;
  for (const auto& [handle, op] : ops_) {
    if (!op.is_send && !op.done) peers.push_back(op.peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

void TcpTransport::send_liveness() {
  std::lock_guard<std::mutex> lock(mutex_);
  ping_peers();
}

void TcpTransport::ping_peers() {
  if (!failed_.is_ok() || closed_) return;
  last_ping_sent_ = Clock::now();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peers_[peer].closing()) continue;
    queue_control(peer, FrameType::kPing, 0, 0, nullptr, 0);
    flush_peer(peer);
  }
}

void TcpTransport::answer_liveness() {
  if (Clock::now() - last_ping_sent_ >= Milliseconds(kLivenessAnswerMs)) ping_peers();
}

Clock::time_point TcpTransport::last_heard(int peer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peer >= 0 && peer < size_ ? peers_[peer].last_heard : Clock::time_point();
}

Status TcpTransport::progress(Milliseconds max_wait, bool* activity) {
  std::unique_lock<std::mutex> lock(mutex_);
  *activity = false;
  if (closed_)
    return failed_.is_ok() ? invalid_argument("progress on a closed tcp transport") : failed_;
  if (!failed_.is_ok()) return failed_;
  int ready = wait_for_events(lock, 0);
  int64_t wait_ms = std::min<int64_t>(max_wait.count(), INT32_MAX);
  if (!suspected_.is_ok()) {  // wake when a lost connection's grace ends
    const auto left = std::chrono::ceil<Milliseconds>(suspected_until_ - Clock::now()).count();
    wait_ms = std::clamp<int64_t>(left, 0, wait_ms);
  }
  if (ready == 0 && !activity_ && wait_ms > 0) {
    ready = wait_for_events(lock, static_cast<int>(wait_ms));
  }
  settle_suspected_failure();
  if (ping_answer_due_) {
    ping_answer_due_ = false;
    answer_liveness();
  }
  *activity = activity_;
  activity_ = false;
  return failed_;
}

// Waits for readiness (without the lock, so abort() can run meanwhile) and handles it.
int TcpTransport::wait_for_events(std::unique_lock<std::mutex>& lock, int timeout_ms) {
  epoll_event events[kMaxEvents];
  if (timeout_ms > 0) lock.unlock();
  int ready = ::epoll_wait(epoll_.get(), events, kMaxEvents, timeout_ms);
  if (timeout_ms > 0) lock.lock();
  if (ready < 0) {
    if (errno != EINTR) fail(system_error("epoll_wait()", errno), true);
    return 0;
  }
  for (int i = 0; i < ready && failed_.is_ok() && !closed_; ++i) {
    if (events[i].data.ptr == nullptr) {  // wake(): drain the eventfd
      uint64_t count = 0;
      ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof count);
      (void)ignored;
      continue;
    }
    const uint32_t e = events[i].events;
    service(*static_cast<Stream*>(events[i].data.ptr), (e & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0,
            (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0);
  }
  return ready;
}

void TcpTransport::service(Stream& stream, bool readable, bool writable) {
  bool moved = false;
  if (writable && stream.has_output()) {
    Status sent = stream.flush(*this, &moved);
    if (!sent.is_ok() && peers_[stream.peer()].closing()) {
      stream.abandon_output();  // it said goodbye and expects nothing more from us
    } else if (!sent.is_ok()) {
      // A peer that found the root cause writes its ABORT and closes; our write can fail before
      // we read that frame. Read what has arrived first, so its reason wins over "lost".
      if (failed_.is_ok() && !stream.parked()) {
        bool ignored = false;
        (void)stream.receive(*this, kReadBudgetBytes, &ignored);
      }
      if (!failed_.is_ok()) return;
      fail(peer_failed("connection to rank " + std::to_string(stream.peer()) + " lost (" +
                       sent.message() + ")"),
           false);
      return;
    }
  }
  if (readable && failed_.is_ok() && !stream.parked()) {
    frames_read_ = pings_read_ = 0;
    bool read = false;
    Status received = stream.receive(*this, kReadBudgetBytes, &read);
    if (!received.is_ok()) {
      fail(received, true);
      return;
    }
    if (stream.peer_closed()) handle_stream_closed(stream);
    // Liveness notices alone are no progress of any transfer (they would keep a stalled
    // collective from ever reaching its deadline).
    const bool only_pings =
        frames_read_ > 0 && frames_read_ == pings_read_ && !stream.mid_receive();
    if (read && !only_pings) activity_ = true;
    // RTRs just read may have released data onto any of this peer's connections.
    if (failed_.is_ok()) flush_peer(stream.peer());
  }
  if (moved) activity_ = true;
  update_interest(stream);
}

void TcpTransport::update_interest(Stream& stream) {
  uint32_t want = 0;
  if (failed_.is_ok() && !closed_) {
    if (!stream.parked() && !stream.peer_closed()) want |= EPOLLIN;
    if (stream.has_output() && !stream.output_broken()) want |= EPOLLOUT;
  }
  if (want == stream.armed_events) return;
  epoll_event event{};
  event.events = want;
  event.data.ptr = &stream;
  // An fd with no interest is removed: EPOLLHUP would otherwise be reported forever.
  const int op =
      want == 0 ? EPOLL_CTL_DEL : (stream.armed_events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
  if (::epoll_ctl(epoll_.get(), op, stream.fd(), &event) == 0) stream.armed_events = want;
}

}  // namespace tcp
}  // namespace tidegate
