// The accepting side of the TCP transport's connection set-up (tcp_connect.h): every rank
// accepts the data connections of the ranks above it.
//
// Concurrently: each accepted socket runs the server side of the job-secret handshake and the
// hello as a small non-blocking state machine under its own short deadline, all driven by one
// poll loop together with the listener. A connection that is silent, slow or hostile then
// costs one slot until its deadline and never delays another: an honest rank's connection is
// admitted as soon as its bytes arrive, whatever else is queued on the port. Unauthenticated
// connections are bounded in number; beyond the bound the oldest is dropped first (a rank's
// handshake takes milliseconds, so the oldest is the least likely to be one).
#pragma once

#include <cstddef>

#include "base/status.h"
#include "base/transport.h"
#include "transports/tcp/tcp_connect.h"

namespace tidegate::tcp {

// How long one accepted connection may take to authenticate and say hello.
inline constexpr int64_t kAcceptHandshakeMs = 3000;
// Connections being authenticated at once, beyond those the acceptor expects.
inline constexpr size_t kMaxSpareHandshakes = 64;

// Accepts the `streams` connections of every rank above ctx.rank on `listen_fd` into *links,
// until all arrived (OK), ctx.deadline (TIMEOUT naming the missing ranks and the refusals) or
// `stop_fd` becomes readable (ABORTED: the connecting side failed).
Status accept_higher_ranks(const TransportContext& ctx, int streams, int listen_fd, int stop_fd,
                           Links* links);

}  // namespace tidegate::tcp
