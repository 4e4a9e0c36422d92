#include "base/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace tidegate {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Status parse_host_port(const std::string& address, std::string* host, int* port) {
  std::string h;
  std::string p;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':')
      return config_error("address '" + address + "' is not [ipv6]:port");
    h = address.substr(1, close - 1);
    p = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return config_error("address '" + address + "' is not host:port");
    h = address.substr(0, colon);
    p = address.substr(colon + 1);
  }
  char* end = nullptr;
  long value = std::strtol(p.c_str(), &end, 10);
  if (p.empty() || *end != '\0' || value < 0 || value > 65535)
    return config_error("address '" + address + "' has an invalid port '" + p + "'");
  *host = h;
  *port = static_cast<int>(value);
  return Status::ok();
}

namespace {

Status resolve(const std::string& host, int port, bool passive, addrinfo** result) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, result);
  if (rc != 0) {
    return config_error("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  return Status::ok();
}

}  // namespace

Status listen_tcp(const std::string& host, int port, int backlog, UniqueFd* out, int* bound_port) {
  addrinfo* list = nullptr;
  TG_RETURN_IF_ERROR(resolve(host, port, true, &list));
  Status last = system_error("no address to bind for '" + host + "'", EADDRNOTAVAIL);
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = system_error("socket()", errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = system_error("bind(" + host + ":" + std::to_string(port) + ")", errno);
      continue;
    }
    if (::listen(fd.get(), backlog) != 0) {
      last = system_error("listen()", errno);
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    *bound_port = addr.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    Status st = set_nonblocking(fd.get(), true);
    if (!st.is_ok()) {
      last = std::move(st);
      continue;
    }
    freeaddrinfo(list);
    *out = std::move(fd);
    return Status::ok();
  }
  freeaddrinfo(list);
  return last;
}

Status connect_tcp(const std::string& host, int port, Deadline deadline, UniqueFd* out) {
  const std::string target = host + ":" + std::to_string(port);
  auto backoff = Milliseconds(1);
  while (true) {
    addrinfo* list = nullptr;
    TG_RETURN_IF_ERROR(resolve(host, port, false, &list));
    int saved = ECONNREFUSED;
    for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
      UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) {
        saved = errno;
        continue;
      }
      // Non-blocking connect so the deadline also bounds an unanswered SYN.
      TG_RETURN_IF_ERROR(set_nonblocking(fd.get(), true));
      int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        int ready = ::poll(&pfd, 1, deadline.poll_timeout_ms());
        if (ready <= 0) {
          saved = ready == 0 ? ETIMEDOUT : errno;
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc != 0) {
        saved = errno;
        continue;
      }
      TG_RETURN_IF_ERROR(set_nonblocking(fd.get(), false));
      TG_RETURN_IF_ERROR(set_nodelay(fd.get()));
      freeaddrinfo(list);
      *out = std::move(fd);
      return Status::ok();
    }
    freeaddrinfo(list);
    if (deadline.passed()) {
      return timeout_error("could not connect to " + target + " before the deadline (last error: " +
                           std::strerror(saved) + "); is the peer running and reachable?");
    }
    if (saved != ECONNREFUSED && saved != ETIMEDOUT && saved != EHOSTUNREACH &&
        saved != ENETUNREACH && saved != EAGAIN) {
      return system_error("connect(" + target + ")", saved);
    }
    // The listener may not be up yet: retry with a bounded exponential backoff.
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, Milliseconds(100));
  }
}

Status read_full(int fd, void* buffer, size_t n, Deadline deadline, const char* what) {
  char* p = static_cast<char*>(buffer);
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      return peer_failed(std::string("connection from ") + peer_name(fd) +
                         " closed while reading " + what);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return system_error(std::string("recv(") + what + ")", errno);
    }
    pollfd pfd{fd, POLLIN, 0};
    int ready = ::poll(&pfd, 1, deadline.poll_timeout_ms());
    if (ready < 0 && errno != EINTR) return system_error("poll()", errno);
    if (ready == 0 && deadline.passed()) {
      return timeout_error(std::string("timed out reading ") + what + " from " + peer_name(fd));
    }
  }
  return Status::ok();
}

Status write_full(int fd, const void* buffer, size_t n, Deadline deadline, const char* what) {
  const char* p = static_cast<const char*>(buffer);
  size_t done = 0;
  while (done < n) {
    ssize_t put = ::send(fd, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (put > 0) {
      done += static_cast<size_t>(put);
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      if (errno == EPIPE || errno == ECONNRESET) {
        return peer_failed(std::string("connection to ") + peer_name(fd) +
                           " closed while writing " + what);
      }
      return system_error(std::string("send(") + what + ")", errno);
    }
    pollfd pfd{fd, POLLOUT, 0};
    int ready = ::poll(&pfd, 1, deadline.poll_timeout_ms());
    if (ready < 0 && errno != EINTR) return system_error("poll()", errno);
    if (ready == 0 && deadline.passed()) {
      return timeout_error(std::string("timed out writing ") + what + " to " + peer_name(fd));
    }
  }
  return Status::ok();
}

Status set_nonblocking(int fd, bool nonblocking) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) return system_error("fcntl(F_GETFL)", errno);
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return system_error("fcntl(F_SETFL)", errno);
  return Status::ok();
}

Status set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return system_error("setsockopt(TCP_NODELAY)", errno);
  return Status::ok();
}

namespace {
std::string address_text(const sockaddr_storage& addr, bool with_port) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  return with_port ? std::string(text) + ":" + std::to_string(port) : std::string(text);
}
}  // namespace

Status local_address(int fd, std::string* host) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return system_error("getsockname()", errno);
  *host = address_text(addr, false);
  return Status::ok();
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return address_text(addr, true);
}

Status route_source_address(const std::string& host, int port, std::string* local) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) return config_error("cannot resolve '" + host + "': " + gai_strerror(rc));
  Status result = system_error("no route to " + host, ENETUNREACH);
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    result = local_address(fd.get(), local);
    if (result.is_ok()) break;
  }
  freeaddrinfo(list);
  return result;
}

Status interface_address(const std::string& interface_name, std::string* host) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return system_error("getifaddrs()", errno);
  Status result = config_error("network interface '" + interface_name +
                               "' has no IPv4 address (see `ip addr`)");
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if (interface_name != ifa->ifa_name) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, ifa->ifa_addr, sizeof(sockaddr_in));
    *host = address_text(addr, false);
    result = Status::ok();
    break;
  }
  ::freeifaddrs(list);
  return result;
}

}  // namespace tidegate
