// Small POSIX socket helpers shared by the bootstrap store and the TCP transport. Every
// blocking helper takes a Deadline: nothing here waits forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// "host:port" split; IPv4 dotted quads, "localhost" and bracketed/unbracketed IPv6 accepted.
Status parse_host_port(const std::string& address, std::string* host, int* port);

// Listening TCP socket bound to host:port (port 0 = ephemeral), non-blocking, SO_REUSEADDR.
Status listen_tcp(const std::string& host, int port, int backlog, UniqueFd* fd, int* bound_port);

// Connects to host:port, retrying refused connections (the peer may not listen yet) until the
// deadline. The returned socket is blocking with TCP_NODELAY set.
Status connect_tcp(const std::string& host, int port, Deadline deadline, UniqueFd* fd);

// Reads/writes exactly n bytes on a socket (blocking or not), polling until the deadline.
// A peer that closes early is PEER_FAILED; the deadline passing is TIMEOUT.
Status read_full(int fd, void* buffer, size_t n, Deadline deadline, const char* what);
Status write_full(int fd, const void* buffer, size_t n, Deadline deadline, const char* what);

Status set_nonblocking(int fd, bool nonblocking);
Status set_nodelay(int fd);

// The local IPv4/IPv6 address of a connected socket, as text ("10.0.0.2").
Status local_address(int fd, std::string* host);
// "ip:port" of the remote end, for log messages (never fails; "?" when unknown).
std::string peer_name(int fd);
// The local address the kernel would use to reach host:port (a UDP socket is connected, which
// sends nothing, and its local address read back). Used to advertise a reachable address.
Status route_source_address(const std::string& host, int port, std::string* local);
// IPv4 address of a network interface ("eth0" -> "10.0.0.2").
Status interface_address(const std::string& interface_name, std::string* host);

}  // namespace tidegate
