// The built-in rendezvous store: a small TCP key-value server (hosted by rank 0 or by the
// launcher) and its client. Every connection first runs the HMAC handshake of auth.h with the
// job secret; a client that fails it, or sends garbage, is logged and dropped while the server
// keeps serving everyone else.
//
// Wire protocol after the handshake (little-endian, every length capped by store.h's limits):
//   request:  u8 kind ('S' set | 'G' get) | u32 key_len | key | (set) u32 value_len | value
//             (get) u64 timeout_ms
//   response: u8 status ('K' ok | 'T' timeout | 'E' error) | u32 len | value-or-message
// A get waits on the server until the key is set or its timeout passes.
#pragma once

#include <memory>
#include <string>

#include "base/auth.h"
#include "base/config.h"
#include "base/status.h"
#include "base/store.h"

namespace tidegate {

class TcpStoreServer {
 public:
  // Binds host:port (port 0 = ephemeral) and starts serving on a background thread.
  static Status start(const std::string& host, int port, const Secret& secret,
                      std::unique_ptr<TcpStoreServer>* server);
  // The same with the caps of `config` (TIDEGATE_STORE_MAX_BYTES, TIDEGATE_STORE_MAX_KEYS).
  static Status start(const std::string& host, int port, const Secret& secret, const Config& config,
                      std::unique_ptr<TcpStoreServer>* server);
  virtual ~TcpStoreServer() = default;
  // "host:port" clients should connect to.
  virtual std::string address() const = 0;
  // Number of connections refused so far (failed handshake or malformed request); for tests.
  virtual int rejected_connections() const = 0;
  // Stops accepting, closes every connection and joins the thread. Idempotent.
  virtual void stop() = 0;
};

// Connects to a store at "host:port" (retrying until the deadline while the server starts)
// and authenticates. The client holds one connection; calls are serialised internally.
Status connect_tcp_store(const std::string& address, const Secret& secret, Deadline deadline,
                         std::unique_ptr<Store>* store);

}  // namespace tidegate
