// Tunable limits of the TCP store server (tcp_store.h). TcpStoreServer::start uses the
// defaults; tests and the launcher can tighten them. Every limit exists so that a client that
// is slow, silent, dead or hostile costs the server a bounded amount of time and memory and
// never delays anyone else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/auth.h"
#include "base/config.h"
#include "base/status.h"
#include "base/types.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/tcp_store_protocol.h"

namespace tidegate {

inline constexpr size_t kMinDescriptorReserve = 64;
// What one stored key costs the server beyond its bytes (map node, strings), for the cap.
inline constexpr int64_t kStoreEntryOverheadBytes = 64;

struct TcpStoreServerOptions {
  // From accept to the end of the handshake: a client that sends nothing, half a response or a
  // wrong proof is refused (and counted in rejected_connections()) within this time.
  Milliseconds handshake_timeout{10'000};
  // From the first byte of a request to its last, and from the first byte of a response to the
  // client having read it all: a half-sent request is refused, an unread answer dropped.
  Milliseconds request_timeout{10'000};
  // An authenticated connection with nothing in flight is closed after this long (0 = never),
  // so clients that vanished without a FIN do not pin resources for the life of the job. The
  // client reconnects transparently, so this is invisible to live ones.
  Milliseconds idle_timeout{300'000};
  // Connections beyond this many are refused at once (a rendezvous needs one per rank). Also
  // bounded by the descriptor limit, less the reserve below.
  size_t max_connections = 16384;
  // Connections still in their handshake: beyond this many (and beyond half of what the
  // descriptor limit leaves after the reserve), the oldest is dropped to make room. An honest
  // client authenticates within milliseconds, so the oldest is the least likely to be one.
  size_t max_unauthenticated = 1024;
  // The process's descriptor limit (RLIMIT_NOFILE's soft limit when 0). The server keeps
  // max(kMinDescriptorReserve, limit / 4) descriptors free for the rest of the job (the
  // transports of the rank that hosts it), and drops the oldest unauthenticated connection
  // whenever an accepted descriptor's number shows the process is that close to the limit.
  size_t descriptor_limit = 0;
  // Caps on what clients holding the secret may store (TIDEGATE_STORE_MAX_BYTES and
  // TIDEGATE_STORE_MAX_KEYS): a set beyond them is answered with an error and stores nothing.
  // Bytes count keys, values and kStoreEntryOverheadBytes per key.
  int64_t max_total_bytes = int64_t{64} << 20;
  int64_t max_keys = 262144;
  // A get waits on the server at most this long per request (the client asks again).
  int64_t max_get_wait_ms = kMaxStoreGetWaitMs;
};

// The options a store serves a job with: the defaults, with the caps from `config`.
TcpStoreServerOptions store_server_options(const Config& config);

// Binds host:port (port 0 = ephemeral) and serves on a background thread with `options`.
Status start_tcp_store_server(const std::string& host, int port, const Secret& secret,
                              const TcpStoreServerOptions& options,
                              std::unique_ptr<TcpStoreServer>* server);

}  // namespace tidegate
