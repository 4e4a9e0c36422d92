// The request side of the TCP store server: parsing and answering requests, parking gets
// until their key is set, and acting on each connection's deadline.
#include <algorithm>

#include "base/log.h"
#include "bootstrap/tcp_store_server_impl.h"

namespace tidegate {

namespace {
constexpr const char* kRole = "store";
constexpr const char* kLogWho = kStoreServerLogName;
}  // namespace

// Handles every complete request in the input, one answer in flight at a time (so a client
// that does not read its answers cannot make the server buffer more than one). Returns false
// when the connection was closed.
bool TcpStoreServerImpl::pump(StoreConnection& conn, uint64_t id, Clock::time_point now) {
  while (true) {
    const size_t before = conn.input().size();
    Status st = process_input(conn, id, now);
    if (!st.is_ok()) {
      reject(id, st.message());
      return false;
    }
    if (!conn.flush(now).is_ok()) {
      close_connection(id);
      return false;
    }
    if (conn.input().size() == before || conn.input().empty()) return true;
  }
}

Status TcpStoreServerImpl::process_input(StoreConnection& conn, uint64_t id,
                                         Clock::time_point now) {
  if (conn.phase() == StoreConnection::Phase::kHandshake) {
    // Returned bare, without a trail: it becomes a log line about the client, not a stack.
    Status st = conn.advance_handshake(secret_, kRole, now);
    if (!st.is_ok()) return st;
    if (conn.phase() != StoreConnection::Phase::kHandshake) handshaking_.erase(id);
  }
  while (conn.phase() == StoreConnection::Phase::kReady && !conn.input().empty() &&
         !conn.output_pending()) {
    StoreRequest request;
    size_t consumed = 0;
    std::string error;
    switch (parse_store_request(conn.input(), &request, &consumed, &error)) {
      case ParseOutcome::kNeedMore:
        return Status::ok();
      case ParseOutcome::kInvalid:
        conn.queue_output(encode_store_response(kStoreResponseError, error), now);
        return protocol_error("malformed request: " + error);
      case ParseOutcome::kComplete:
        conn.consume_input(consumed, now);
        handle_request(conn, id, std::move(request), now);
        break;
    }
  }
  return Status::ok();
}

void TcpStoreServerImpl::handle_request(StoreConnection& conn, uint64_t id, StoreRequest request,
                                        Clock::time_point now) {
  if (request.kind == kStoreRequestSet) {
    const std::string refusal = over_capacity(request);
    if (!refusal.empty()) {
      // Not the client's protocol error: the connection stays, the value is not stored.
      conn.queue_output(encode_store_response(kStoreResponseError, refusal), now);
      refusals_.log("refused a set of key '" + request.key + "' from " + conn.peer() + ": " +
                    refusal);
      return;
    }
    conn.queue_output(encode_store_response(kStoreResponseOk, ""), now);
    wake_waiters(request.key, request.value, now);
    store_value(request);
    return;
  }
  auto found = values_.find(request.key);
  if (found != values_.end()) {
    conn.queue_output(encode_store_response(kStoreResponseOk, found->second), now);
  } else if (request.timeout_ms <= 0) {
    conn.queue_output(encode_store_response(kStoreResponseTimeout, "key not set"), now);
  } else {
    const int64_t wait_ms = std::min(request.timeout_ms, options_.max_get_wait_ms);
    conn.start_waiting(request.key, now + Milliseconds(wait_ms));
    waiters_.emplace(request.key, id);
  }
}

std::string TcpStoreServerImpl::over_capacity(const StoreRequest& request) const {
  auto found = values_.find(request.key);
  const int64_t entry =
      static_cast<int64_t>(request.key.size() + request.value.size()) + kStoreEntryOverheadBytes;
  const int64_t replaced = found == values_.end()
                               ? 0
                               : static_cast<int64_t>(found->first.size() + found->second.size()) +
                                     kStoreEntryOverheadBytes;
  const int64_t keys = static_cast<int64_t>(values_.size()) + (found == values_.end() ? 1 : 0);
  if (keys > options_.max_keys) {
    return "the store is full: it holds " + std::to_string(values_.size()) +
           " keys, the most TIDEGATE_STORE_MAX_KEYS allows";
  }
  if (stored_bytes_ - replaced + entry > options_.max_total_bytes) {
    return "the store is full: it holds " + std::to_string(stored_bytes_) + " bytes and " +
           "this set needs " + std::to_string(entry - replaced) + " more, over " +
           "TIDEGATE_STORE_MAX_BYTES=" + std::to_string(options_.max_total_bytes);
  }
  return "";
}

void TcpStoreServerImpl::store_value(StoreRequest& request) {
  auto [it, inserted] = values_.try_emplace(request.key);
  if (!inserted) {
    stored_bytes_ -=
        static_cast<int64_t>(it->first.size() + it->second.size()) + kStoreEntryOverheadBytes;
  }
  stored_bytes_ +=
      static_cast<int64_t>(it->first.size() + request.value.size()) + kStoreEntryOverheadBytes;
  it->second = std::move(request.value);
}

void TcpStoreServerImpl::wake_waiters(const std::string& key, const std::string& value,
                                      Clock::time_point now) {
  auto [first, last] = waiters_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    StoreConnection& waiter = connections_.at(it->second);
    waiter.stop_waiting(now);
    waiter.queue_output(encode_store_response(kStoreResponseOk, value), now);
    woken_.push_back(it->second);
  }
  waiters_.erase(first, last);
}

// Sends the answers wake_waiters() queued and handles any request queued behind them. Done
// after the event that woke them rather than inside it, so no handler runs re-entrantly.
void TcpStoreServerImpl::run_woken(Clock::time_point now) {
  while (!woken_.empty()) {
    const uint64_t id = woken_.back();
    woken_.pop_back();
    auto it = connections_.find(id);
    if (it != connections_.end() && pump(it->second, id, now)) update_interest(it->second, id);
  }
}

void TcpStoreServerImpl::expire_deadlines(Clock::time_point now) {
  std::vector<uint64_t> due;
  for (const auto& [id, conn] : connections_) {
    if (conn.deadline(options_) <= now) due.push_back(id);
  }
  for (uint64_t id : due) {
    auto it = connections_.find(id);
    if (it != connections_.end()) expire_one(it->second, id, now);
  }
}

void TcpStoreServerImpl::expire_one(StoreConnection& conn, uint64_t id, Clock::time_point now) {
  using Phase = StoreConnection::Phase;
  if (conn.phase() == Phase::kWaiting) {
    // Not an error: the get's own timeout passed. The client asks again if it has time left.
    forget_waiter(conn.waiting_key(), id);
    conn.stop_waiting(now);
    conn.queue_output(encode_store_response(kStoreResponseTimeout, "key not set"), now);
    woken_.push_back(id);
    return;
  }
  const auto ms = [](Milliseconds d) { return std::to_string(d.count()) + " ms"; };
  if (conn.phase() == Phase::kHandshake) {
    return reject(id, "it did not complete the handshake within " + ms(options_.handshake_timeout));
  }
  if (!conn.input().empty()) {
    return reject(id, "it sent only part of a request within " + ms(options_.request_timeout));
  }
  if (conn.output_pending()) {
    TG_LOG(kWarn, kLogWho,
           "closing connection from " + conn.peer() +
               ": it did not read its "
               "answer within " +
               ms(options_.request_timeout));
  } else {
    TG_LOG(kDebug, kLogWho,
           "closing connection from " + conn.peer() + ", idle for " + ms(options_.idle_timeout));
  }
  close_connection(id);
}

int TcpStoreServerImpl::wait_timeout_ms(Clock::time_point now) const {
  // Bounded even with nothing due, so the loop never blocks without a deadline.
  Clock::time_point next = now + Milliseconds(10'000);
  for (const auto& [id, conn] : connections_) next = std::min(next, conn.deadline(options_));
  if (!accepting_) next = std::min(next, accept_retry_at_);
  next = std::min(next, refusals_.next_flush());
  if (next <= now) return 0;
  // Round up: waking a fraction of a millisecond early would spin until the deadline.
  const auto wait = std::chrono::ceil<Milliseconds>(next - now);
  return static_cast<int>(wait.count());
}

void TcpStoreServerImpl::forget_waiter(const std::string& key, uint64_t id) {
  auto [first, last] = waiters_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second == id) {
      waiters_.erase(it);
      return;
    }
  }
}

}  // namespace tidegate
