#include "transports/tcp/tcp_connect.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "base/auth.h"
#include "base/log.h"
#include "base/store.h"

namespace tidegate::tcp {

namespace {

constexpr uint32_t kHelloMagic = 0x31484754;  // "TGH1"
constexpr size_t kHelloBytes = 32;
// A connection that has not finished its handshake this long after accept() is dropped, so
// a silent client cannot hold the acceptor for the whole set-up deadline.
constexpr int64_t kHandshakeMs = 10000;
constexpr const char* kAuthRole = "tcp";

// The acceptor's answer to a hello.
enum Verdict : uint32_t {
  kAccepted = 0,
  kWrongCommunicator = 1,
  kWrongWorldSize = 2,
  kWrongStreamCount = 3,
  kUnexpectedRank = 4,
  kDuplicate = 5,
};

// Sent by the connecting side; echoed (with the acceptor's own rank and a verdict) back.
struct Hello {
  uint32_t rank = 0;
  uint32_t size = 0;
  uint32_t stream = 0;
  uint32_t streams = 0;
  uint64_t comm_id = 0;
  uint32_t verdict = kAccepted;
};

void encode_hello(const Hello& h, unsigned char out[kHelloBytes]) {
  const uint64_t words[] = {kHelloMagic, h.rank, h.size, h.stream, h.streams};
  unsigned char* p = out;
  for (uint64_t w : words)
    for (int i = 0; i < 4; ++i) *p++ = static_cast<unsigned char>(w >> (8 * i));
  for (int i = 0; i < 8; ++i) *p++ = static_cast<unsigned char>(h.comm_id >> (8 * i));
  for (int i = 0; i < 4; ++i) *p++ = static_cast<unsigned char>(h.verdict >> (8 * i));
}

bool decode_hello(const unsigned char in[kHelloBytes], Hello* h) {
  auto get = [&in](size_t at, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    return v;
  };
  if (get(0, 4) != kHelloMagic) return false;
  h->rank = static_cast<uint32_t>(get(4, 4));
  h->size = static_cast<uint32_t>(get(8, 4));
  h->stream = static_cast<uint32_t>(get(12, 4));
  h->streams = static_cast<uint32_t>(get(16, 4));
  h->comm_id = get(20, 8);
  h->verdict = static_cast<uint32_t>(get(28, 4));
  return true;
}

const char* verdict_text(uint32_t verdict) {
  switch (verdict) {
    case kAccepted:
      return "accepted";
    case kWrongCommunicator:
      return "it belongs to another communicator";
    case kWrongWorldSize:
      return "its world size differs";
    case kWrongStreamCount:
      return "its TIDEGATE_TCP_STREAMS differs";
    case kUnexpectedRank:
      return "no such rank is expected to connect here";
    case kDuplicate:
      return "that rank's connection is already established";
  }
  return "unknown verdict";
}

std::string who(const TransportContext& ctx) { return "rank " + std::to_string(ctx.rank); }

std::string format_host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Deadline handshake_deadline(Deadline overall) {
  Deadline own = Deadline::after_ms(kHandshakeMs);
  return own.at() < overall.at() ? own : overall;
}

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

// Why the acceptor refused a hello, as the connecting rank reports it.
Status refusal_status(uint32_t verdict, int peer, const Hello& sent) {
  const std::string them = "rank " + std::to_string(peer);
  switch (verdict) {
    case kWrongCommunicator:
      return protocol_error(them +
                            " refused our data connection: it belongs to another "
                            "communicator (stale address in the store?)");
    case kWrongWorldSize:
      return config_error(them +
                          " refused our data connection: it has a different world size "
                          "than our " +
                          std::to_string(sent.size));
    case kWrongStreamCount:
      return config_error(them +
                          " refused our data connection: its TIDEGATE_TCP_STREAMS "
                          "differs from ours (" +
                          std::to_string(sent.streams) + "); set the same value on every rank");
    default:
      return protocol_error(them + " refused our data connection: " + verdict_text(verdict));
  }
}

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
    TG_RETURN_IF_ERROR(ctx.store->get("tcp/" + std::to_string(peer), ctx.deadline, &address));
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

// Accepts the connections of every higher rank. Runs on its own thread while the set-up
// thread connects downwards, so that no rank waits on a rank that is itself still connecting.
class Acceptor {
 public:
  Acceptor(const TransportContext& ctx, int streams, int listen_fd, int stop_fd, Links* links)
      : ctx_(ctx), streams_(streams), listen_fd_(listen_fd), stop_fd_(stop_fd), links_(links) {}

  Status run() {
    const size_t expected = static_cast<size_t>(ctx_.size - 1 - ctx_.rank) * streams_;
    while (accepted_ < expected) {
      pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      int ready = ::poll(fds, 2, ctx_.deadline.poll_timeout_ms());
      if (ready < 0 && errno != EINTR) return system_error("poll(tcp listener)", errno);
      if (fds[1].revents != 0) return aborted_error("connection set-up was cancelled");
      if (ready == 0 && ctx_.deadline.passed()) return missing_ranks_error();
      if ((fds[0].revents & POLLIN) == 0) continue;
      UniqueFd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd.valid()) continue;  // the client gave up already, or EAGAIN: poll again
      Status st = admit(std::move(fd));
      if (!st.is_ok()) {
        ++refused_;
        last_refusal_ = st.to_string();
        TG_LOG(kWarn, who(ctx_), "refused a data connection: " + last_refusal_);
      }
    }
    return Status::ok();
  }

 private:
  // Authenticates one connection and reads its hello; stores it in links_ when welcome.
  Status admit(UniqueFd fd) {
    const Deadline deadline = handshake_deadline(ctx_.deadline);
    const std::string from = peer_name(fd.get());
    TG_RETURN_IF_ERROR(apply_socket_options(fd.get(), ctx_.config->tcp_buffer_bytes()));
    TG_RETURN_IF_ERROR(authenticate_server_side(fd.get(), *ctx_.secret, kAuthRole, deadline));
    unsigned char bytes[kHelloBytes];
    TG_RETURN_IF_ERROR(read_full(fd.get(), bytes, kHelloBytes, deadline, "tcp hello"));
    Hello hello;
    if (!decode_hello(bytes, &hello)) return protocol_error(from + " sent a malformed hello");
    Hello reply = hello;
    reply.rank = static_cast<uint32_t>(ctx_.rank);
    reply.verdict = judge(hello);
    encode_hello(reply, bytes);
    TG_RETURN_IF_ERROR(write_full(fd.get(), bytes, kHelloBytes, deadline, "tcp hello reply"));
    if (reply.verdict != kAccepted) {
      return protocol_error(from + " claiming to be rank " + std::to_string(hello.rank) +
                            " (connection " + std::to_string(hello.stream) +
                            ") refused: " + verdict_text(reply.verdict));
    }
    TG_RETURN_IF_ERROR(set_nonblocking(fd.get(), true));
    (*links_)[hello.rank][hello.stream] = std::move(fd);
    ++accepted_;
    return Status::ok();
  }

  uint32_t judge(const Hello& h) const {
    if (h.comm_id != ctx_.comm_id) return kWrongCommunicator;
    if (h.size != static_cast<uint32_t>(ctx_.size)) return kWrongWorldSize;
    if (h.streams != static_cast<uint32_t>(streams_)) return kWrongStreamCount;
    if (h.rank <= static_cast<uint32_t>(ctx_.rank) || h.rank >= h.size || h.stream >= h.streams)
      return kUnexpectedRank;
    if ((*links_)[h.rank][h.stream].valid()) return kDuplicate;
    return kAccepted;
  }

  Status missing_ranks_error() const {
    std::string missing;
    for (int peer = ctx_.rank + 1; peer < ctx_.size; ++peer) {
      const auto& streams = (*links_)[peer];
      bool complete = std::all_of(streams.begin(), streams.end(),
                                  [](const UniqueFd& fd) { return fd.valid(); });
      if (!complete) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
    }
    std::string text = who(ctx_) + " timed out waiting for data connections from rank(s) " +
                       missing + "; are they running, and do they reach this address?";
    if (refused_ > 0) {
      text +=
          " (refused " + std::to_string(refused_) + " connection(s), last: " + last_refusal_ + ")";
    }
    return timeout_error(text);
  }

  const TransportContext& ctx_;
  const int streams_;
  const int listen_fd_;
  const int stop_fd_;
  Links* links_;
  size_t accepted_ = 0;
  size_t refused_ = 0;
  std::string last_refusal_;
};

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
  Acceptor acceptor(ctx, streams, listener.get(), stop.get(), links);
  Status accepted;
  std::thread accept_thread([&] { accepted = acceptor.run(); });
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
