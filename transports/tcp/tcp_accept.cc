#include "transports/tcp/tcp_accept.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <string>
#include <vector>

#include "base/auth.h"
#include "base/auth_proof.h"
#include "base/log_limiter.h"
#include "transports/tcp/tcp_hello.h"

namespace tidegate::tcp {

namespace {

// One accepted connection on its way to being admitted.
struct Handshake {
  enum class Step { kAuthResponse, kHello, kReply };

  UniqueFd fd;
  std::string from;
  Clock::time_point deadline;
  Step step = Step::kAuthResponse;
  std::string server_nonce;
  std::string in;   // bytes of the current step received so far
  std::string out;  // bytes queued to the client
  size_t sent = 0;
  Hello hello;  // kReply: the client's hello, and the verdict sent back

  bool authenticated() const { return step != Step::kAuthResponse; }
  bool output_pending() const { return sent < out.size(); }
};

class Acceptor {
 public:
  Acceptor(const TransportContext& ctx, int streams, int listen_fd, int stop_fd, Links* links)
      : ctx_(ctx),
        streams_(streams),
        listen_fd_(listen_fd),
        stop_fd_(stop_fd),
        links_(links),
        expected_(static_cast<size_t>(ctx.size - 1 - ctx.rank) * static_cast<size_t>(streams)),
        refusals_(LogLevel::kWarn, "rank " + std::to_string(ctx.rank), "refused data connections") {
  }

  Status run();

 private:
  void accept_pending(Clock::time_point now);
  // Reads, writes and advances one handshake; false when it ended (admitted or refused).
  bool service(Handshake& h, short revents, Clock::time_point now);
  Status advance(Handshake& h);
  Status flush(Handshake& h);
  void refuse(Handshake& h, const std::string& why);
  uint32_t judge(const Hello& hello) const;
  bool claimed(uint32_t rank, uint32_t stream) const;
  Status missing_ranks_error() const;

  const TransportContext& ctx_;
  const int streams_;
  const int listen_fd_;
  const int stop_fd_;
  Links* links_;
  const size_t expected_;
  size_t admitted_ = 0;
  std::list<Handshake> handshakes_;  // oldest first
  size_t refused_ = 0;
  std::string last_refusal_;
  LogLimiter refusals_;
};

Status Acceptor::run() {
  std::vector<pollfd> fds;
  std::vector<Handshake*> order;
  while (admitted_ < expected_) {
    Clock::time_point wake = ctx_.deadline.at();
    fds.assign({{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}});
    order.clear();
    for (Handshake& h : handshakes_) {
      fds.push_back(
          {h.fd.get(), static_cast<short>(POLLIN | (h.output_pending() ? POLLOUT : 0)), 0});
      order.push_back(&h);
      wake = std::min(wake, h.deadline);
    }
    wake = std::min(wake, refusals_.next_flush());
    const int timeout_ms = Deadline(wake).poll_timeout_ms();
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return system_error("poll(tcp listener)", errno);
    const Clock::time_point now = Clock::now();
    refusals_.flush(now);
    if (fds[1].revents != 0) return aborted_error("connection set-up was cancelled");
    for (size_t i = 0; i < order.size(); ++i) {
      Handshake& h = *order[i];
      if (!service(h, fds[i + 2].revents, now)) h.fd.reset();  // ended: drop below
    }
    handshakes_.remove_if([](const Handshake& h) { return !h.fd.valid(); });
    if (admitted_ >= expected_) break;
    if (fds[0].revents & POLLIN) accept_pending(now);
    if (ctx_.deadline.passed()) return missing_ranks_error();
  }
  return Status::ok();
}

void Acceptor::accept_pending(Clock::time_point now) {
  while (true) {
    UniqueFd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;  // EAGAIN (none left), or the client gave up already
    // Bounded: beyond what is expected plus a margin, the oldest unauthenticated goes first.
    if (handshakes_.size() >= expected_ - admitted_ + kMaxSpareHandshakes) {
      auto oldest = std::find_if(handshakes_.begin(), handshakes_.end(),
                                 [](const Handshake& h) { return !h.authenticated(); });
      if (oldest == handshakes_.end()) oldest = handshakes_.begin();
      refuse(*oldest, "dropped to make room for newer connections (it had not authenticated)");
      handshakes_.erase(oldest);
    }
    Handshake h;
    h.from = peer_name(fd.get());
    h.fd = std::move(fd);
    h.deadline = std::min(now + Milliseconds(kAcceptHandshakeMs), ctx_.deadline.at());
    Status st = apply_socket_options(h.fd.get(), ctx_.config->tcp_buffer_bytes());
    if (st.is_ok()) st = random_bytes(kNonceBytes, &h.server_nonce);
    if (!st.is_ok()) {
      refuse(h, st.message());
      continue;
    }
    h.out.assign(kAuthMagic, kAuthMagicBytes);
    h.out += h.server_nonce;
    handshakes_.push_back(std::move(h));
    if (!service(handshakes_.back(), POLLOUT, now)) handshakes_.pop_back();
  }
}

bool Acceptor::service(Handshake& h, short revents, Clock::time_point now) {
  if (revents & POLLIN) {
    char buffer[256];
    while (true) {
      const ssize_t got = ::recv(h.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (got > 0) {
        h.in.append(buffer, static_cast<size_t>(got));
        if (h.in.size() > kAuthResponseBytes + kHelloBytes) break;  // judged below
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      refuse(h, got == 0 ? "it closed the connection during the handshake"
                         : system_error("recv()", errno).message());
      return false;
    }
  }
  Status st = advance(h);
  if (st.is_ok()) st = flush(h);
  if (!st.is_ok()) {
    refuse(h, st.message());
    return false;
  }
  if (h.step == Handshake::Step::kReply && !h.output_pending()) {
    if (h.hello.verdict != kAccepted) {
      refuse(h, "claiming to be rank " + std::to_string(h.hello.rank) + " (connection " +
                    std::to_string(h.hello.stream) + "): " + verdict_text(h.hello.verdict));
      return false;
    }
    (*links_)[h.hello.rank][h.hello.stream] = std::move(h.fd);
    ++admitted_;
    return false;
  }
  if (now >= h.deadline) {
    refuse(h, "it did not complete the handshake within " + std::to_string(kAcceptHandshakeMs) +
                  " ms");
    return false;
  }
  return true;
}

Status Acceptor::advance(Handshake& h) {
  if (h.step == Handshake::Step::kAuthResponse) {
    if (!starts_like_auth_magic(h.in)) {
      return protocol_error("it does not speak the tidegate handshake");
    }
    if (h.in.size() < kAuthResponseBytes) return Status::ok();
    const std::string client_nonce = h.in.substr(kAuthMagicBytes, kNonceBytes);
    const std::string client_mac = h.in.substr(kAuthMagicBytes + kNonceBytes, kMacBytes);
    if (!constant_time_equal(client_mac,
                             client_proof(*ctx_.secret, kAuthRole, h.server_nonce, client_nonce))) {
      return auth_error(std::string("it failed authentication for '") + kAuthRole +
                        "': its job secret differs from ours");
    }
    h.out += server_proof(*ctx_.secret, kAuthRole, client_nonce, h.server_nonce);
    h.in.erase(0, kAuthResponseBytes);
    h.step = Handshake::Step::kHello;
  }
  if (h.step == Handshake::Step::kHello && h.in.size() >= kHelloBytes) {
    if (h.in.size() > kHelloBytes) return protocol_error("it sent more than a hello");
    if (!decode_hello(reinterpret_cast<const unsigned char*>(h.in.data()), &h.hello)) {
      return protocol_error("it sent a malformed hello");
    }
    h.hello.verdict = judge(h.hello);
    Hello reply = h.hello;
    reply.rank = static_cast<uint32_t>(ctx_.rank);
    unsigned char bytes[kHelloBytes];
    encode_hello(reply, bytes);
    h.out.append(reinterpret_cast<const char*>(bytes), kHelloBytes);
    h.in.clear();
    h.step = Handshake::Step::kReply;
  }
  if (h.step == Handshake::Step::kReply && !h.in.empty()) {
    return protocol_error("it sent bytes before our answer to its hello");
  }
  return Status::ok();
}

Status Acceptor::flush(Handshake& h) {
  while (h.output_pending()) {
    const ssize_t put = ::send(h.fd.get(), h.out.data() + h.sent, h.out.size() - h.sent,
                               MSG_DONTWAIT | MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status::ok();
    if (put < 0) return peer_failed("it closed the connection during the handshake");
    h.sent += static_cast<size_t>(put);
  }
  return Status::ok();
}

void Acceptor::refuse(Handshake& h, const std::string& why) {
  ++refused_;
  last_refusal_ = h.from + ": " + why;
  refusals_.log("refused a data connection from " + last_refusal_);
  h.fd.reset();
}

bool Acceptor::claimed(uint32_t rank, uint32_t stream) const {
  if ((*links_)[rank][stream].valid()) return true;
  return std::any_of(handshakes_.begin(), handshakes_.end(), [&](const Handshake& h) {
    return h.step == Handshake::Step::kReply && h.hello.verdict == kAccepted &&
           h.hello.rank == rank && h.hello.stream == stream;
  });
}

uint32_t Acceptor::judge(const Hello& h) const {
  if (h.comm_id != ctx_.comm_id) return kWrongCommunicator;
  if (h.size != static_cast<uint32_t>(ctx_.size)) return kWrongWorldSize;
  if (h.streams != static_cast<uint32_t>(streams_)) return kWrongStreamCount;
  if (h.rank <= static_cast<uint32_t>(ctx_.rank) || h.rank >= h.size || h.stream >= h.streams)
    return kUnexpectedRank;
  if (claimed(h.rank, h.stream)) return kDuplicate;
  return kAccepted;
}

Status Acceptor::missing_ranks_error() const {
  std::vector<int> missing;
  for (int peer = ctx_.rank + 1; peer < ctx_.size; ++peer) {
    const auto& links = (*links_)[static_cast<size_t>(peer)];
    const bool complete =
        std::all_of(links.begin(), links.end(), [](const UniqueFd& fd) { return fd.valid(); });
    if (!complete) missing.push_back(peer);
  }
  std::string ranks = missing.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < missing.size(); ++i) {
    ranks += (i == 0 ? "" : ", ") + std::to_string(missing[i]);
  }
  std::string text = "rank " + std::to_string(ctx_.rank) +
                     " timed out waiting for data connections from " + ranks +
                     "; are they running, and do they reach this address?";
  if (refused_ > 0) {
    text +=
        " (refused " + std::to_string(refused_) + " connection(s), last: " + last_refusal_ + ")";
  }
  return timeout_error(text);
}

}  // namespace

Status accept_higher_ranks(const TransportContext& ctx, int streams, int listen_fd, int stop_fd,
                           Links* links) {
  Acceptor acceptor(ctx, streams, listen_fd, stop_fd, links);
  return acceptor.run();
}

}  // namespace tidegate::tcp
