// The TCP store server's internals, shared by the two files that implement it:
// tcp_store_server.cc (life cycle, event loop, connection I/O) and tcp_store_requests.cc
// (requests, parked gets, deadlines). Only the loop thread touches the connection table, the
// values and the waiters, so none of them needs a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/auth_proof.h"
#include "base/log_limiter.h"
#include "base/socket_util.h"
#include "bootstrap/tcp_store_connection.h"
#include "bootstrap/tcp_store_protocol.h"
#include "bootstrap/tcp_store_server.h"

namespace tidegate {

inline constexpr const char* kStoreServerLogName = "store-server";

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(const Secret& secret, const TcpStoreServerOptions& options)
      : secret_(secret),
        options_(options),
        refusals_(LogLevel::kWarn, kStoreServerLogName, "refused store connections") {}
  ~TcpStoreServerImpl() override { stop(); }

  Status bind_and_start(const std::string& host, int port);
  std::string address() const override { return address_; }
  int rejected_connections() const override { return rejected_.load(); }
  void stop() override;

 private:
  void run();
  void accept_new_connections(Clock::time_point now);
  void on_event(uint64_t id, uint32_t events, Clock::time_point now);
  bool pump(StoreConnection& conn, uint64_t id, Clock::time_point now);
  Status process_input(StoreConnection& conn, uint64_t id, Clock::time_point now);
  void handle_request(StoreConnection& conn, uint64_t id, StoreRequest request,
                      Clock::time_point now);
  void wake_waiters(const std::string& key, const std::string& value, Clock::time_point now);
  void run_woken(Clock::time_point now);
  void expire_deadlines(Clock::time_point now);
  void expire_one(StoreConnection& conn, uint64_t id, Clock::time_point now);
  int wait_timeout_ms(Clock::time_point now) const;
  void update_interest(StoreConnection& conn, uint64_t id);
  void reject(uint64_t id, const std::string& why);
  void forget_waiter(const std::string& key, uint64_t id);
  void close_connection(uint64_t id);
  void set_accepting(bool accepting);
  // Sets the connection bounds from the options and the descriptor limit.
  void size_limits();
  // Makes room for a new connection whose descriptor is `fd`: false when it must be refused.
  bool make_room(int fd, std::string* why);
  void count_refusal(const std::string& peer, const std::string& why);
  // The store's caps (TIDEGATE_STORE_MAX_*): the error for a set that would exceed them.
  std::string over_capacity(const StoreRequest& request) const;
  void store_value(StoreRequest& request);

  Secret secret_;
  TcpStoreServerOptions options_;
  std::string address_;
  UniqueFd listener_;
  UniqueFd epoll_;
  UniqueFd wakeup_;
  std::thread thread_;
  std::mutex stop_mutex_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> rejected_{0};
  // False while out of descriptors (see accept_new_connections); retried when a connection
  // closes or at accept_retry_at_, whichever comes first.
  bool accepting_ = true;
  Clock::time_point accept_retry_at_;

  // Touched only by the loop thread.
  uint64_t next_id_ = 2;
  std::map<uint64_t, StoreConnection> connections_;
  std::set<uint64_t> handshaking_;  // connections not yet authenticated, oldest (lowest) first
  size_t max_connections_ = 0;      // from the options and the descriptor limit
  size_t max_unauthenticated_ = 0;
  int crowded_fd_ = 0;  // an accepted descriptor from this number on means few are left
  LogLimiter refusals_;
  std::map<std::string, std::string> values_;
  int64_t stored_bytes_ = 0;  // keys + values + kStoreEntryOverheadBytes per key
  std::multimap<std::string, uint64_t> waiters_;  // key -> connection parked in a get
  std::vector<uint64_t> woken_;  // connections answered by another's set, to pump next
};

}  // namespace tidegate
