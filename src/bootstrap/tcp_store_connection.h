// One client connection of the TCP store server: its non-blocking socket, input and output
// buffers, protocol phase and the times that decide when it is answered or dropped. The
// server's event loop (tcp_store_server.cc) owns these; this file holds the parts that touch
// only one connection: buffered I/O and the server side of the handshake as a state machine.
#pragma once

#include <cstddef>
#include <string>

#include "base/auth.h"
#include "base/socket_util.h"
#include "base/status.h"
#include "base/types.h"
#include "bootstrap/tcp_store_server.h"

namespace tidegate {

class StoreConnection {
 public:
  enum class Phase {
    kHandshake,  // challenge sent, waiting for the client's proof
    kReady,      // authenticated; parsing requests
    kWaiting,    // a get is parked until its key is set or wait_until passes
  };

  StoreConnection(UniqueFd fd, Clock::time_point now);

  int fd() const { return fd_.get(); }
  const std::string& peer() const { return peer_; }
  Phase phase() const { return phase_; }

  // Queues the challenge (magic | fresh nonce). Called once, right after accept.
  Status begin_handshake();
  // Consumes the client's response once it is complete and queues our proof. Fails fast on
  // bytes that are not the handshake magic (PROTOCOL) and on a wrong proof (AUTH).
  Status advance_handshake(const Secret& secret, const char* role, Clock::time_point now);

  // Reads everything the socket has into the input buffer. *peer_closed is set on EOF.
  // PROTOCOL error when the input would exceed `input_cap` (a client flooding us).
  Status read_available(size_t input_cap, Clock::time_point now, bool* peer_closed);
  // Writes as much queued output as the socket takes; PEER_FAILED when the client is gone.
  Status flush(Clock::time_point now);
  bool output_pending() const { return output_sent_ < output_.size(); }
  // Whether the event loop currently asks epoll for writability (saves redundant epoll_ctl).
  bool watching_writes() const { return watching_writes_; }
  void set_watching_writes(bool watching) { watching_writes_ = watching; }
  void queue_output(const std::string& bytes, Clock::time_point now);

  std::string& input() { return input_; }
  // Drops the first n input bytes (a parsed request); restarts the request clock if more remain.
  void consume_input(size_t n, Clock::time_point now);

  void start_waiting(const std::string& key, Clock::time_point until);
  void stop_waiting(Clock::time_point now);
  const std::string& waiting_key() const { return waiting_key_; }

  // When the server must act on this connection: answer its parked get (kWaiting) or drop it
  // (handshake, half request, unread answer or idleness ran out). Zero timeouts disable.
  Clock::time_point deadline(const TcpStoreServerOptions& options) const;

 private:
  UniqueFd fd_;
  std::string peer_;
  Phase phase_ = Phase::kHandshake;
  std::string server_nonce_;
  std::string input_;
  std::string output_;
  size_t output_sent_ = 0;
  bool watching_writes_ = false;
  std::string waiting_key_;
  Clock::time_point accepted_at_;
  Clock::time_point request_started_;  // first byte of the partial request in input_
  Clock::time_point output_started_;   // first queued byte not yet taken by the socket
  Clock::time_point idle_since_;       // last time both buffers became empty
  Clock::time_point wait_until_;
};

}  // namespace tidegate
