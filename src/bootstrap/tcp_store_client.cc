// The TCP store client: one authenticated connection to the store server, one request in
// flight at a time. Requests are idempotent (set overwrites, get reads), so when the server
// has dropped an idle connection the client reconnects and repeats the request once.
#include <algorithm>
#include <mutex>

#include "base/log.h"
#include "base/socket_util.h"
#include "bootstrap/tcp_store.h"
#include "bootstrap/tcp_store_protocol.h"

namespace tidegate {

namespace {

constexpr const char* kRole = "store";
// A set is answered as soon as the server's event loop reads it; this bounds only a network
// or server that has stopped answering.
constexpr Milliseconds kSetTimeout{60'000};
// How long after a get's own wait the client still waits for the server's answer to arrive.
constexpr Milliseconds kResponseGrace{1'000};
// How long a client whose connection broke tries to reach the server again. Short: a server
// that closed an idle connection answers at once, and one that is gone should fail the job
// quickly rather than at the end of a long rendezvous deadline.
constexpr Milliseconds kReconnectWindow{2'000};

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(std::string host, int port, Secret secret)
      : host_(std::move(host)),
        port_(port),
        secret_(std::move(secret)),
        address_(host_ + ":" + std::to_string(port_)) {}

  Status connect(Deadline deadline);
  Status set(const std::string& key, const std::string& value) override;
  Status get(const std::string& key, Deadline deadline, std::string* value) override;

 private:
  Status round_trip(const std::string& request, Deadline deadline, char* status,
                    std::string* payload);
  Status exchange(const std::string& request, Deadline deadline, char* status,
                  std::string* payload);

  const std::string host_;
  const int port_;
  const Secret secret_;
  const std::string address_;
  std::mutex mutex_;  // serialises requests on the one connection
  UniqueFd fd_;
};

Status TcpStoreClient::connect(Deadline deadline) {
  UniqueFd fd;
  TG_RETURN_IF_ERROR(connect_tcp(host_, port_, deadline, &fd));
  TG_RETURN_IF_ERROR(authenticate_client_side(fd.get(), secret_, kRole, deadline));
  fd_ = std::move(fd);
  return Status::ok();
}

Status TcpStoreClient::exchange(const std::string& request, Deadline deadline, char* status,
                                std::string* payload) {
  TG_RETURN_IF_ERROR(
      write_full(fd_.get(), request.data(), request.size(), deadline, "store request"));
  char header[kStoreResponseHeaderBytes];
  TG_RETURN_IF_ERROR(read_full(fd_.get(), header, sizeof header, deadline, "store response"));
  size_t payload_bytes = 0;
  TG_RETURN_IF_ERROR(decode_store_response_header(header, status, &payload_bytes));
  payload->assign(payload_bytes, '\0');
  TG_RETURN_IF_ERROR(
      read_full(fd_.get(), payload->data(), payload_bytes, deadline, "store response"));
  return Status::ok();
}

Status TcpStoreClient::round_trip(const std::string& request, Deadline deadline, char* status,
                                  std::string* payload) {
  const bool had_connection = fd_.valid();
  // No connection means an earlier request broke it: reconnect within the short window.
  if (!had_connection) {
    TG_RETURN_IF_ERROR(connect(Deadline(std::min(deadline.at(), Clock::now() + kReconnectWindow))));
  }
  Status st = exchange(request, deadline, status, payload);
  if (st.is_ok()) return st;
  // After any failure the stream may be mid-message: never reuse it.
  fd_.reset();
  const bool connection_lost =
      st.code() == TIDEGATE_ERR_PEER_FAILED || st.code() == TIDEGATE_ERR_SYSTEM;
  if (!had_connection || !connection_lost || deadline.passed()) return st;
  // The server closed a connection that had worked (idle timeout or a restart): one fresh try.
  TG_LOG(kDebug, "store-client", "reconnecting to " + address_ + " after: " + st.message());
  const Deadline reconnect_deadline(std::min(deadline.at(), Clock::now() + kReconnectWindow));
  Status reconnected = connect(reconnect_deadline);
  if (!reconnected.is_ok()) {
    return peer_failed("lost the connection to the store (" + st.message() +
                       ") and could not reconnect: " + reconnected.message());
  }
  st = exchange(request, deadline, status, payload);
  if (!st.is_ok()) fd_.reset();
  return st;
}

Status TcpStoreClient::set(const std::string& key, const std::string& value) {
  TG_RETURN_IF_ERROR(check_store_value(key, value));
  std::lock_guard<std::mutex> lock(mutex_);
  char status = 0;
  std::string payload;
  Status st =
      round_trip(encode_set_request(key, value), Deadline::after(kSetTimeout), &status, &payload);
  if (!st.is_ok()) {
    return std::move(st).with_context("store " + address_ + ", set of key '" + key + "': ");
  }
  if (status != kStoreResponseOk) {
    return protocol_error("store " + address_ + " refused the set of key '" + key +
                          "': " + payload);
  }
  return Status::ok();
}

Status TcpStoreClient::get(const std::string& key, Deadline deadline, std::string* value) {
  TG_RETURN_IF_ERROR(check_store_key(key));
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point started = Clock::now();
  while (true) {
    // Rounded up so that a sub-millisecond remainder is still waited for, not spun on.
    const int64_t left_ms =
        std::max<int64_t>(0, std::chrono::ceil<Milliseconds>(deadline.at() - Clock::now()).count());
    const int64_t wait_ms = std::min(left_ms, kMaxStoreGetWaitMs);
    char status = 0;
    std::string payload;
    Status st =
        round_trip(encode_get_request(key, wait_ms),
                   Deadline::after(Milliseconds(wait_ms) + kResponseGrace), &status, &payload);
    if (!st.is_ok()) {
      return std::move(st).with_context("store " + address_ + ", get of key '" + key + "': ");
    }
    if (status == kStoreResponseOk) {
      *value = std::move(payload);
      return Status::ok();
    }
    if (status != kStoreResponseTimeout) {
      return protocol_error("store " + address_ + " refused the get of key '" + key +
                            "': " + payload);
    }
    if (deadline.passed()) break;
    // The server capped this wait below our deadline: ask again for the time that is left.
  }
  const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - started);
  return timeout_error("store key '" + key + "' was not set within " +
                       std::to_string(waited.count()) + " ms (store " + address_ +
                       "); did every rank start, and do they agree on the job?");
}

}  // namespace

Status connect_tcp_store(const std::string& address, const Secret& secret, Deadline deadline,
                         std::unique_ptr<Store>* store) {
  std::string host;
  int port = 0;
  TG_RETURN_IF_ERROR(parse_host_port(address, &host, &port));
  auto client = std::make_unique<TcpStoreClient>(host, port, secret);
  Status st = client->connect(deadline);
  if (!st.is_ok()) return std::move(st).with_context("store " + address + ": ");
  *store = std::move(client);
  return Status::ok();
}

}  // namespace tidegate
