#include "transports/tcp/peer_exit_watch.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transports/tcp/tcp_connect.h"

namespace tidegate::tcp {

namespace {

// The only byte a watch connection ever carries.
constexpr unsigned char kGoodbye = 0x47;

}  // namespace

Status PeerExitWatch::create(const TransportContext& context, std::unique_ptr<PeerExitWatch>* out) {
  Links links;
  TG_RETURN_IF_ERROR(connect_all_peers(context, 1, &links));
  std::vector<UniqueFd> fds(static_cast<size_t>(context.size));
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) fds[static_cast<size_t>(peer)] = std::move(links[peer][0]);
  }
  out->reset(new PeerExitWatch(context.rank, std::move(fds)));
  return Status::ok();
}

Status PeerExitWatch::check() {
  std::vector<pollfd> fds;
  std::vector<int> peers;
  for (size_t peer = 0; peer < links_.size(); ++peer) {
    if (!links_[peer].valid()) continue;
    fds.push_back({links_[peer].get(), POLLIN, 0});
    peers.push_back(static_cast<int>(peer));
  }
  if (fds.empty()) return Status::ok();
  const int ready = ::poll(fds.data(), fds.size(), 0);
  if (ready <= 0) return Status::ok();  // nothing happened (or EINTR: look next time)
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const int peer = peers[i];
    UniqueFd& link = links_[static_cast<size_t>(peer)];
    unsigned char byte = 0;
    const ssize_t got = ::recv(link.get(), &byte, 1, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (got == 1 && byte == kGoodbye) {
      link.reset();  // it left normally: its close is not an exit
      continue;
    }
    const std::string how = got == 0  ? "closed without a goodbye"
                            : got < 0 ? std::string("failed: ") + std::strerror(errno)
                                      : "carried an unexpected byte";
    link.reset();
    return peer_failed("rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                       "'s process has ended (its liveness connection " + how + ")");
  }
  return Status::ok();
}

void PeerExitWatch::say_goodbye() {
  for (UniqueFd& link : links_) {
    if (!link.valid()) continue;
    // Best effort: a peer that is gone already cannot be told; MSG_NOSIGNAL keeps a closed
    // connection from raising SIGPIPE.
    const ssize_t sent = ::send(link.get(), &kGoodbye, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)sent;
    // Closing with unread bytes would send a reset, which may discard the goodbye before the
    // peer reads it; the peer's own goodbye is the only thing that can be waiting.
    unsigned char unread[16];
    while (::recv(link.get(), unread, sizeof unread, MSG_DONTWAIT) > 0) {
    }
    link.reset();
  }
}

int PeerExitWatch::watched() const {
  int n = 0;
  for (const UniqueFd& link : links_) n += link.valid() ? 1 : 0;
  return n;
}

}  // namespace tidegate::tcp
