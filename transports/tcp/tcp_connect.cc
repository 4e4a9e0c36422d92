#include "transports/tcp/tcp_connect.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "base/auth.h"
#include "base/store.h"
#include "transports/tcp/tcp_accept.h"
#include "transports/tcp/tcp_hello.h"

namespace tidegate::tcp {

namespace {

std::string who(const TransportContext& ctx) { return "rank " + std::to_string(ctx.rank); }

std::string format_host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

Status apply_socket_options(int fd, int64_t buffer_bytes) {
  TG_RETURN_IF_ERROR(set_nodelay(fd));
  if (buffer_bytes > 0) {
    const int bytes = static_cast<int>(std::min<int64_t>(buffer_bytes, INT32_MAX));
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes) != 0) {
      return system_error("setsockopt(TIDEGATE_TCP_BUFFER_BYTES)", errno);
    }
  }
  return Status::ok();
}

namespace {

// Opens stream `stream` to lower rank `peer`, listening at host:port.
Status connect_one(const TransportContext& ctx, int peer, const std::string& host, int port,
                   int stream, int streams, UniqueFd* out) {
  UniqueFd fd;
  TG_RETURN_IF_ERROR(connect_tcp(host, port, ctx.deadline, &fd));
  TG_RETURN_IF_ERROR(apply_socket_options(fd.get(), ctx.config->tcp_buffer_bytes()));
  TG_RETURN_IF_ERROR(authenticate_client_side(fd.get(), *ctx.secret, kAuthRole, ctx.deadline));
  Hello hello;
  hello.rank = static_cast<uint32_t>(ctx.rank);
  hello.size = static_cast<uint32_t>(ctx.size);
  hello.stream = static_cast<uint32_t>(stream);
  hello.streams = static_cast<uint32_t>(streams);
  hello.comm_id = ctx.comm_id;
  unsigned char bytes[kHelloBytes];
  encode_hello(hello, bytes);
  TG_RETURN_IF_ERROR(write_full(fd.get(), bytes, kHelloBytes, ctx.deadline, "tcp hello"));
  TG_RETURN_IF_ERROR(read_full(fd.get(), bytes, kHelloBytes, ctx.deadline, "tcp hello reply"));
  Hello reply;
  if (!decode_hello(bytes, &reply)) {
    return protocol_error("rank " + std::to_string(peer) + " answered our hello with garbage");
  }
  if (reply.verdict != kAccepted) return refusal_status(reply.verdict, peer, hello);
  if (reply.rank != static_cast<uint32_t>(peer) || reply.comm_id != ctx.comm_id) {
    return protocol_error("the listener published as rank " + std::to_string(peer) +
                          " answered as rank " + std::to_string(reply.rank) + " of communicator " +
                          std::to_string(reply.comm_id));
  }
  TG_RETURN_IF_ERROR(set_nonblocking(fd.get(), true));
  *out = std::move(fd);
  return Status::ok();
}

Status connect_to_lower_ranks(const TransportContext& ctx, int streams, Links* links) {
  for (int peer = 0; peer < ctx.rank; ++peer) {
    std::string address;
    Status published = ctx.store->get("tcp/" + std::to_string(peer), ctx.deadline, &address);
    if (!published.is_ok()) {
      return std::move(published).with_context(who(ctx) + " waiting for rank " +
                                               std::to_string(peer) +
                                               " to publish its address (is it running?): ");
    }
    std::string host;
    int port = 0;
    TG_RETURN_IF_ERROR(parse_host_port(address, &host, &port));
    for (int stream = 0; stream < streams; ++stream) {
      Status st = connect_one(ctx, peer, host, port, stream, streams, &(*links)[peer][stream]);
      if (!st.is_ok()) {
        return std::move(st).with_context(who(ctx) + " connecting to rank " + std::to_string(peer) +
                                          " at " + address + ": ");
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status choose_bind_host(const TransportContext& ctx, std::string* host) {
  const std::string& iface = ctx.config->raw("TIDEGATE_TCP_IFACE");
  if (!iface.empty()) return interface_address(iface, host);
  std::string address = ctx.config->raw("TIDEGATE_TCP_ADDR");
  if (address.empty() || address == "auto") {
    address = ctx.advertise_host.empty() ? "127.0.0.1" : ctx.advertise_host;
  }
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  if (address == "0.0.0.0" || address == "::" || address == "*") {
    return config_error("TIDEGATE_TCP_ADDR='" + address +
                        "' is a wildcard: give an address "
                        "the other ranks can reach (or TIDEGATE_TCP_IFACE)");
  }
  *host = address;
  return Status::ok();
}

Status connect_all_peers(const TransportContext& ctx, int streams, Links* links) {
  links->clear();
  links->resize(static_cast<size_t>(ctx.size));
  for (int peer = 0; peer < ctx.size; ++peer) {
    if (peer != ctx.rank) (*links)[peer].resize(static_cast<size_t>(streams));
  }
  std::string host;
  TG_RETURN_IF_ERROR(choose_bind_host(ctx, &host));
  UniqueFd listener;
  int port = 0;
  const int backlog = std::clamp(ctx.size * streams, 64, 4096);
  TG_RETURN_IF_ERROR(listen_tcp(host, 0, backlog, &listener, &port));
  TG_RETURN_IF_ERROR(
      ctx.store->set("tcp/" + std::to_string(ctx.rank), format_host_port(host, port)));

  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop.valid()) return system_error("eventfd()", errno);
  // Accepting runs on its own thread while this one connects downwards, so that no rank waits
  // on a rank that is itself still connecting.
  Status accepted;
  std::thread accept_thread(
      [&] { accepted = accept_higher_ranks(ctx, streams, listener.get(), stop.get(), links); });
  Status connected = connect_to_lower_ranks(ctx, streams, links);
  if (!connected.is_ok()) {
    const uint64_t one = 1;
    ssize_t ignored = ::write(stop.get(), &one, sizeof one);
    (void)ignored;
  }
  accept_thread.join();
  TG_RETURN_IF_ERROR(std::move(connected));
  TG_RETURN_IF_ERROR(std::move(accepted));
  return Status::ok();
}

}  // namespace tidegate::tcp
