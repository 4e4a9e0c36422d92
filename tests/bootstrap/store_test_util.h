// Helpers shared by the TCP store tests: a server on an ephemeral loopback port and raw
// sockets that play the part of misbehaving clients.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/auth.h"
#include "base/auth_proof.h"
#include "base/socket_util.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/tcp_store_server.h"

namespace tidegate::testing {

inline const Secret& test_secret() {
  static const Secret secret = Secret::from_text("bootstrap-test-secret");
  return secret;
}

inline std::unique_ptr<TcpStoreServer> start_server(
    const TcpStoreServerOptions& options = TcpStoreServerOptions()) {
  std::unique_ptr<TcpStoreServer> server;
  Status st = start_tcp_store_server("127.0.0.1", 0, test_secret(), options, &server);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return server;
}

inline std::unique_ptr<Store> connect_client(const TcpStoreServer& server,
                                             const Secret& secret = test_secret()) {
  std::unique_ptr<Store> store;
  Status st = connect_tcp_store(server.address(), secret, Deadline::after_ms(10'000), &store);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return store;
}

// A plain TCP connection to the server, before any handshake.
inline UniqueFd connect_raw(const TcpStoreServer& server) {
  std::string host;
  int port = 0;
  UniqueFd fd;
  EXPECT_TRUE(parse_host_port(server.address(), &host, &port).is_ok());
  Status st = connect_tcp(host, port, Deadline::after_ms(10'000), &fd);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return fd;
}

// A raw connection that has passed the handshake, for speaking the request protocol by hand.
inline UniqueFd connect_authenticated_raw(const TcpStoreServer& server) {
  UniqueFd fd = connect_raw(server);
  Status st =
      authenticate_client_side(fd.get(), test_secret(), "store", Deadline::after_ms(10'000));
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return fd;
}

// Reads until the server closes the connection; returns the status of the read that ended it
// (PEER_FAILED when the server closed it, TIMEOUT if it did not within the deadline).
inline Status read_until_closed(int fd, Deadline deadline, std::string* received = nullptr) {
  while (true) {
    char byte = 0;
    Status st = read_full(fd, &byte, 1, deadline, "until closed");
    if (!st.is_ok()) return st;
    if (received != nullptr) received->push_back(byte);
  }
}

inline int64_t elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<Milliseconds>(Clock::now() - since).count();
}

}  // namespace tidegate::testing
