#include "bootstrap/tcp_store_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "base/auth_proof.h"

namespace tidegate {

namespace {
constexpr size_t kReadChunkBytes = 64 * 1024;
}  // namespace

StoreConnection::StoreConnection(UniqueFd fd, Clock::time_point now)
    : fd_(std::move(fd)),
      peer_(peer_name(fd_.get())),
      accepted_at_(now),
      request_started_(now),
      output_started_(now),
      idle_since_(now),
      wait_until_(now) {}

Status StoreConnection::begin_handshake() {
  TG_RETURN_IF_ERROR(random_bytes(kNonceBytes, &server_nonce_));
  std::string challenge(kAuthMagic, kAuthMagicBytes);
  challenge += server_nonce_;
  queue_output(challenge, accepted_at_);
  return Status::ok();
}

Status StoreConnection::advance_handshake(const Secret& secret, const char* role,
                                          Clock::time_point now) {
  if (!starts_like_auth_magic(input_)) {
    return protocol_error(
        "it does not speak the tidegate handshake (its first bytes are not "
        "the handshake magic)");
  }
  if (input_.size() < kAuthResponseBytes) return Status::ok();  // wait for the rest
  const std::string client_nonce = input_.substr(kAuthMagicBytes, kNonceBytes);
  const std::string client_mac = input_.substr(kAuthMagicBytes + kNonceBytes, kMacBytes);
  if (!constant_time_equal(client_mac, client_proof(secret, role, server_nonce_, client_nonce))) {
    return auth_error(std::string("it failed authentication for '") + role +
                      "': its job secret differs from ours");
  }
  queue_output(server_proof(secret, role, client_nonce, server_nonce_), now);
  phase_ = Phase::kReady;
  consume_input(kAuthResponseBytes, now);
  return Status::ok();
}

Status StoreConnection::read_available(size_t input_cap, Clock::time_point now, bool* peer_closed) {
  *peer_closed = false;
  char chunk[kReadChunkBytes];
  while (true) {
    ssize_t got = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (got == 0) {
      *peer_closed = true;
      return Status::ok();
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      if (errno == ECONNRESET) {
        *peer_closed = true;
        return Status::ok();
      }
      return system_error("recv() from store client " + peer_, errno);
    }
    const size_t n = static_cast<size_t>(got);
    if (input_.size() + n > input_cap) {
      return protocol_error("it sent more than " + std::to_string(input_cap) +
                            " bytes without waiting for an answer");
    }
    if (input_.empty()) request_started_ = now;
    input_.append(chunk, n);
  }
}

Status StoreConnection::flush(Clock::time_point now) {
  while (output_pending()) {
    ssize_t put = ::send(fd_.get(), output_.data() + output_sent_, output_.size() - output_sent_,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
    if (put < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      if (errno == EPIPE || errno == ECONNRESET) {
        return peer_failed("store client " + peer_ + " closed its connection");
      }
      return system_error("send() to store client " + peer_, errno);
    }
    output_sent_ += static_cast<size_t>(put);
  }
  output_.clear();
  output_sent_ = 0;
  if (input_.empty()) idle_since_ = now;
  return Status::ok();
}

void StoreConnection::queue_output(const std::string& bytes, Clock::time_point now) {
  if (!output_pending()) {
    output_.clear();
    output_sent_ = 0;
    output_started_ = now;
  }
  output_ += bytes;
}

void StoreConnection::consume_input(size_t n, Clock::time_point now) {
  input_.erase(0, n);
  // Bytes already behind this request start the next one's clock now.
  if (!input_.empty())
    request_started_ = now;
  else if (!output_pending())
    idle_since_ = now;
}

void StoreConnection::start_waiting(const std::string& key, Clock::time_point until) {
  phase_ = Phase::kWaiting;
  waiting_key_ = key;
  wait_until_ = until;
}

void StoreConnection::stop_waiting(Clock::time_point now) {
  phase_ = Phase::kReady;
  waiting_key_.clear();
  idle_since_ = now;
}

Clock::time_point StoreConnection::deadline(const TcpStoreServerOptions& options) const {
  Clock::time_point when = Clock::time_point::max();
  auto bound = [&](Clock::time_point since, Milliseconds limit) {
    if (limit.count() > 0) when = std::min(when, since + limit);
  };
  switch (phase_) {
    case Phase::kHandshake:
      bound(accepted_at_, options.handshake_timeout);
      break;
    case Phase::kWaiting:
      when = wait_until_;
      break;
    case Phase::kReady:
      if (!input_.empty()) bound(request_started_, options.request_timeout);
      if (output_pending()) bound(output_started_, options.request_timeout);
      if (input_.empty() && !output_pending()) bound(idle_since_, options.idle_timeout);
      break;
  }
  return when;
}

}  // namespace tidegate
