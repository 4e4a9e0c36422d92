// The TCP store server: one background thread runs an epoll loop over the listening socket and
// every client connection, all non-blocking.
//
// Why one event loop with the handshake as a per-connection state machine, rather than a
// blocking authenticate_server_side() per connection on worker threads: the handshake is a
// challenge, one fixed-size read and one fixed-size write, cheap to drive from the loop, and
// then no number of silent or slow clients can exhaust a worker pool and stall honest ones;
// nothing needs to be joined on stop() but the one thread, and no lock guards the key-value
// map (only the loop thread touches it).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "bootstrap/tcp_store_server_impl.h"

namespace tidegate {

namespace {
constexpr const char* kLogWho = kStoreServerLogName;
// epoll user data for the two non-client descriptors; client ids start above them.
constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeupId = 1;
constexpr int kMaxEventsPerWait = 64;
// After accept() ran out of descriptors, how long before trying again with none closed.
constexpr Milliseconds kAcceptRetryDelay{100};
// A client's input may hold the rest of a handshake and one whole request, never more.
constexpr size_t kInputCapBytes = kAuthResponseBytes + kMaxStoreRequestBytes;
}  // namespace

void TcpStoreServerImpl::size_limits() {
  size_t limit = options_.descriptor_limit;
  if (limit == 0) {
    rlimit nofile{};
    limit = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY
                ? static_cast<size_t>(nofile.rlim_cur)
                : size_t{1} << 20;
  }
  const size_t reserve = std::max(kMinDescriptorReserve, limit / 4);
  const size_t budget = limit > reserve ? limit - reserve : 0;
  max_connections_ = std::max<size_t>(1, std::min(options_.max_connections, budget));
  max_unauthenticated_ = std::max<size_t>(1, std::min(options_.max_unauthenticated, budget / 2));
  crowded_fd_ = static_cast<int>(std::min<size_t>(budget, INT32_MAX));
}

Status TcpStoreServerImpl::bind_and_start(const std::string& host, int port) {
  size_limits();
  int bound_port = 0;
  TG_RETURN_IF_ERROR(listen_tcp(host, port, 128, &listener_, &bound_port));
  const bool ipv6_literal = host.find(':') != std::string::npos;
  address_ = (ipv6_literal ? "[" + host + "]" : host) + ":" + std::to_string(bound_port);

  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return system_error("epoll_create1()", errno);
  wakeup_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wakeup_.valid()) return system_error("eventfd()", errno);
  for (auto [fd, id] : {std::pair{listener_.get(), kListenerId}, {wakeup_.get(), kWakeupId}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return system_error("epoll_ctl(ADD)", errno);
    }
  }
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void TcpStoreServerImpl::stop() {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  if (!thread_.joinable()) return;
  stopping_.store(true);
  const uint64_t one = 1;
  ssize_t ignored = ::write(wakeup_.get(), &one, sizeof one);
  (void)ignored;
  thread_.join();
  // The loop has exited: releasing the sockets here frees the port for a successor.
  connections_.clear();
  waiters_.clear();
  listener_.reset();
}

void TcpStoreServerImpl::run() {
  epoll_event events[kMaxEventsPerWait];
  while (!stopping_.load()) {
    const int ready =
        ::epoll_wait(epoll_.get(), events, kMaxEventsPerWait, wait_timeout_ms(Clock::now()));
    if (ready < 0 && errno != EINTR) {
      TG_LOG(kError, kLogWho, system_error("epoll_wait()", errno).message() + "; store stops");
      return;
    }
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < std::max(ready, 0); ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerId)
        accept_new_connections(now);
      else if (id != kWakeupId)
        on_event(id, events[i].events, now);
    }
    run_woken(now);
    expire_deadlines(now);
    run_woken(now);
    refusals_.flush(now);
    if (!accepting_ && now >= accept_retry_at_) set_accepting(true);
  }
  refusals_.flush(Clock::now(), /*force=*/true);
}

void TcpStoreServerImpl::accept_new_connections(Clock::time_point now) {
  while (true) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      const int saved = errno;
      if (saved == EINTR || saved == ECONNABORTED) continue;
      if (saved == EAGAIN || saved == EWOULDBLOCK) return;
      // Out of descriptors or memory: make room by dropping the oldest unauthenticated
      // connection, or, with none, stop watching the listener (it stays readable and would
      // spin) until a connection closes.
      if (!handshaking_.empty()) {
        reject(*handshaking_.begin(),
               "dropped for a newer connection: the process ran out of descriptors (" +
                   system_error("accept()", saved).message() + ")");
        continue;
      }
      refusals_.log(system_error("accept()", saved).message() +
                    "; not accepting until a connection closes");
      return set_accepting(false);
    }
    std::string why;
    if (!make_room(fd.get(), &why)) {
      count_refusal(peer_name(fd.get()), why);
      continue;
    }
    (void)set_nodelay(fd.get());  // best effort: only latency depends on it
    const uint64_t id = next_id_++;
    const int raw_fd = fd.get();
    StoreConnection& conn = connections_.try_emplace(id, std::move(fd), now).first->second;
    handshaking_.insert(id);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw_fd, &ev) != 0) {
      TG_LOG(kWarn, kLogWho, system_error("epoll_ctl(ADD)", errno).message());
      close_connection(id);
      continue;
    }
    Status st = conn.begin_handshake();
    if (st.is_ok()) st = conn.flush(now);
    if (!st.is_ok()) {
      reject(id, st.message());
      continue;
    }
    update_interest(conn, id);
  }
}

void TcpStoreServerImpl::on_event(uint64_t id, uint32_t events, Clock::time_point now) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;  // closed earlier in this batch
  StoreConnection& conn = it->second;
  if (events & EPOLLOUT) {
    if (!conn.flush(now).is_ok()) return close_connection(id);
  }
  bool peer_closed = false;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    Status st = conn.read_available(kInputCapBytes, now, &peer_closed);
    if (!st.is_ok()) return reject(id, st.message());
  }
  // Whatever arrived before a close is judged first, so garbage is reported as garbage.
  if (!pump(conn, id, now)) return;
  if (!peer_closed) return update_interest(conn, id);
  if (conn.phase() == StoreConnection::Phase::kHandshake) {
    return reject(id, "it closed the connection before completing the handshake");
  }
  close_connection(id);
}

void TcpStoreServerImpl::update_interest(StoreConnection& conn, uint64_t id) {
  const bool want_writes = conn.output_pending();
  if (want_writes == conn.watching_writes()) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want_writes ? EPOLLOUT : 0u);
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, conn.fd(), &ev) != 0) {
    TG_LOG(kWarn, kLogWho, system_error("epoll_ctl(MOD)", errno).message());
    return close_connection(id);
  }
  conn.set_watching_writes(want_writes);
}

// Unauthenticated connections are bounded by count, and every connection by the descriptors the
// process has left: at either bound the oldest connection still in its handshake is dropped and
// the new one takes its place. Only when there is none to drop is the new one refused.
bool TcpStoreServerImpl::make_room(int fd, std::string* why) {
  const bool crowded = fd >= crowded_fd_;
  const bool full = connections_.size() >= max_connections_;
  if (!crowded && !full && handshaking_.size() < max_unauthenticated_) return true;
  if (!handshaking_.empty()) {
    reject(*handshaking_.begin(),
           std::string("dropped for a newer connection: it was the oldest that had not "
                       "authenticated, and ") +
               (crowded ? "the process is short of file descriptors"
                        : "the store holds as many connections as it allows"));
    return true;
  }
  *why = crowded ? "the process is short of file descriptors (got descriptor " +
                       std::to_string(fd) + "; the store keeps " + std::to_string(crowded_fd_) +
                       " and leaves the rest to the job)"
                 : "already " + std::to_string(connections_.size()) + " connections open";
  return false;
}

void TcpStoreServerImpl::count_refusal(const std::string& peer, const std::string& why) {
  rejected_.fetch_add(1);
  refusals_.log("refused connection from " + peer + ": " + why);
}

void TcpStoreServerImpl::reject(uint64_t id, const std::string& why) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  count_refusal(it->second.peer(), why);
  (void)it->second.flush(Clock::now());  // best effort: deliver a queued error answer
  close_connection(id);
}

void TcpStoreServerImpl::close_connection(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  if (it->second.phase() == StoreConnection::Phase::kWaiting) {
    forget_waiter(it->second.waiting_key(), id);
  }
  // Closing the descriptor (UniqueFd) also removes it from the epoll set.
  connections_.erase(it);
  handshaking_.erase(id);
  if (!accepting_) set_accepting(true);
}

void TcpStoreServerImpl::set_accepting(bool accepting) {
  if (!accepting) accept_retry_at_ = Clock::now() + kAcceptRetryDelay;
  epoll_event ev{};
  ev.events = accepting ? EPOLLIN : 0u;
  ev.data.u64 = kListenerId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), &ev) == 0) accepting_ = accepting;
}

Status start_tcp_store_server(const std::string& host, int port, const Secret& secret,
                              const TcpStoreServerOptions& options,
                              std::unique_ptr<TcpStoreServer>* server) {
  if (secret.empty()) {
    return auth_error(
        "the TCP store needs a job secret to authenticate its clients: set "
        "TIDEGATE_SECRET or TIDEGATE_SECRET_FILE");
  }
  auto impl = std::make_unique<TcpStoreServerImpl>(secret, options);
  TG_RETURN_IF_ERROR(impl->bind_and_start(host, port));
  TG_LOG(kInfo, kLogWho, "serving the rendezvous store on " + impl->address());
  *server = std::move(impl);
  return Status::ok();
}

Status TcpStoreServer::start(const std::string& host, int port, const Secret& secret,
                             std::unique_ptr<TcpStoreServer>* server) {
  return start_tcp_store_server(host, port, secret, TcpStoreServerOptions(), server);
}

Status TcpStoreServer::start(const std::string& host, int port, const Secret& secret,
                             const Config& config, std::unique_ptr<TcpStoreServer>* server) {
  return start_tcp_store_server(host, port, secret, store_server_options(config), server);
}

TcpStoreServerOptions store_server_options(const Config& config) {
  TcpStoreServerOptions options;
  options.max_total_bytes = config.store_max_bytes();
  options.max_keys = config.store_max_keys();
  return options;
}

}  // namespace tidegate
