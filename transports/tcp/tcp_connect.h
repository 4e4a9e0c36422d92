// Connection set-up of the TCP transport: every rank listens on an ephemeral port of its
// chosen address and publishes "tcp/<rank>" = "host:port" in the communicator's store; rank i
// then opens `streams` connections to every rank j < i and accepts the same number from every
// rank above it. Each connection runs the job-secret handshake (bootstrap/auth.h, role "tcp")
// and then a hello that says who connected (rank, stream index, communicator, world size and
// stream count), answered by a verdict, so a connection from another job, another
// communicator or a rank configured differently is refused with a reason on both ends.
#pragma once

#include <string>
#include <vector>

#include "base/socket_util.h"
#include "base/status.h"
#include "base/transport.h"

namespace tidegate::tcp {

// Connections to every rank: links[peer][stream]; links[own rank] is empty.
using Links = std::vector<std::vector<UniqueFd>>;

// The address this rank binds and advertises: TIDEGATE_TCP_IFACE's IPv4 address when set;
// else TIDEGATE_TCP_ADDR unless it is "auto"; for "auto" the context's advertise_host (the
// address that reaches the store) when known, else 127.0.0.1. A wildcard address is refused:
// peers could not connect to it, and binding every interface by default exposes the port.
Status choose_bind_host(const TransportContext& context, std::string* host);

// TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF when TIDEGATE_TCP_BUFFER_BYTES asks (0 keeps autotuning).
Status apply_socket_options(int fd, int64_t buffer_bytes);

// Builds the full mesh of authenticated connections, everything under context.deadline.
// Returned sockets are non-blocking with TCP_NODELAY (and the configured buffer sizes).
// AUTH when a peer's secret differs, CONFIG when peers disagree on the stream count,
// TIMEOUT (naming the missing ranks) when some rank did not connect in time.
Status connect_all_peers(const TransportContext& context, int streams, Links* links);

}  // namespace tidegate::tcp
