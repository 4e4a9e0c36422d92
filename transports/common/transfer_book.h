// The per-transfer bookkeeping of a transport that sends every message as a wire header and
// then its payload, and posts a receive's payload only once its header has checked out (the
// mpi and ucx transports; tcp frames its own stream and nccl checks headers in groups).
//
// Why the payload waits for the header: a header that does not match (another count, dtype,
// op) means the peer's payload messages no longer pair with this rank's receives; posting the
// payload receive first could write a wrong-sized message into the user's buffer. And the
// payload receives of one (peer, channel) must be posted in irecv order, because both sides'
// payload messages pair by order, so a receive whose header came early still waits for the
// receives posted before it.
//
// The book owns no transport resources. The transport posts the messages, counts them in
// `parts_left` and calls back when they complete; the book keeps the state and the order.
// Not thread-safe: the transport calls it under its own lock.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/transport.h"
#include "base/wire_header.h"
#include "transports/common/transfer_arguments.h"

namespace tidegate {

// One transfer's state; a transport may derive from it to add its own.
struct Transfer {
  bool is_send = false;
  int peer = 0;
  uint32_t channel = 0;
  bool done = false;
  Status status;
  size_t parts_left = 0;        // messages posted and not yet completed
  WireHeader expected;          // receive: the header this rank expects
  size_t length = 0;            // the payload length: a send's own; a receive's from the
                                // sender's header, once it checked out
  char* data = nullptr;         // receive: the user's buffer, filled once the header checked out
  bool header_ok = false;       // receive: the header arrived and matched
  bool payload_posted = false;  // send: always; receive: its payload receive is posted
  std::array<unsigned char, kWireHeaderBytes> wire{};  // the encoded header sent / received
};

template <typename Op>
class TransferBook {
 public:
  using Handle = Transport::Handle;

  // A new handle for a transfer the caller fills in itself (a native collective).
  Handle add(Op** op) {
    const Handle h = next_handle_++;
    *op = &ops_[h];
    return h;
  }

  // A send whose header is encoded into op->wire, ready to post; the header's payload_bytes
  // is the message's length.
  Handle add_send(int peer, uint32_t channel, const WireHeader& header, Op** op) {
    const Handle h = add(op);
    (*op)->is_send = true;
    (*op)->peer = peer;
    (*op)->channel = channel;
    (*op)->length = static_cast<size_t>(header.payload_bytes);
    encode_wire_header(header, (*op)->wire.data());
    return h;
  }

  // A receive, queued behind the earlier receives of its (peer, channel) for its payload.
  Handle add_recv(int peer, uint32_t channel, const WireHeader& expected, void* data, Op** op) {
    const Handle h = add(op);
    (*op)->peer = peer;
    (*op)->channel = channel;
    (*op)->expected = expected;
    (*op)->data = static_cast<char*>(data);
    payload_queues_[{peer, channel}].push_back(h);
    return h;
  }

  // The transfer of `handle`, or nullptr once it is unknown or finished.
  Op* find_pending(Handle handle) {
    auto it = ops_.find(handle);
    return it == ops_.end() || it->second.done ? nullptr : &it->second;
  }

  // Transport::test: reports and forgets a finished transfer.
  Status test(Handle handle, bool* done, size_t* payload_bytes) {
    auto it = ops_.find(handle);
    TG_CHECK_ARG(it != ops_.end(),
                 "test: unknown or already finished transfer handle " + std::to_string(handle));
    *done = it->second.done;
    if (!*done) return Status::ok();
    if (payload_bytes != nullptr) *payload_bytes = it->second.length;
    Status status = std::move(it->second.status);
    ops_.erase(it);
    return status;
  }

  // A receive's header arrived in op.wire: checks it against what `my_rank` expects and, if it
  // matches, posts the payloads now ready on its (peer, channel) through
  // `post_payload(handle, op)`, which posts op.length bytes (the sender's, within a bounded
  // receive's bound) into op.data and counts its messages in op.parts_left. A mismatch
  // finishes `op` with the error and returns it: the caller then fails the whole transport
  // (the streams no longer pair).
  template <typename PostPayload>
  Status accept_header(Op& op, int my_rank, PostPayload&& post_payload) {
    const WireHeader received = decode_wire_header(op.wire.data());
    Status st = check_wire_header(op.expected, received, my_rank, op.peer);
    if (!st.is_ok()) {
      op.done = true;
      op.status = st;
      return st;
    }
    op.length = static_cast<size_t>(received.payload_bytes);
    op.header_ok = true;
    return post_ready_payloads(op.peer, op.channel, post_payload);
  }

  // A transfer is done once its payload is posted and every posted message has completed.
  static void settle(Op& op) {
    if (op.payload_posted && op.parts_left == 0) op.done = true;
  }

  // Finishes every pending transfer with `status`.
  void fail_pending(const Status& status) {
    for (auto& entry : ops_) {
      if (entry.second.done) continue;
      entry.second.done = true;
      entry.second.status = status;
    }
  }

  // Calls visit(const Op&) for every pending transfer.
  template <typename Visit>
  void for_each_pending(Visit&& visit) const {
    for (const auto& entry : ops_) {
      if (!entry.second.done) visit(entry.second);
    }
  }

  // The peers of the pending receives (Transport::awaited_peers), ascending, without
  // `my_rank` (a native collective's own entry).
  std::vector<int> awaited_peers(int my_rank) const {
    std::vector<int> peers;
    for_each_pending([&](const Op& op) {
      if (!op.is_send && op.peer != my_rank) peers.push_back(op.peer);
    });
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    return peers;
  }

  size_t pending() const {
    size_t count = 0;
    for (const auto& entry : ops_) count += entry.second.done ? 0 : 1;
    return count;
  }

 private:
  // Posts the payload receives of (peer, channel) in irecv order, stopping at the first whose
  // header has not arrived yet.
  template <typename PostPayload>
  Status post_ready_payloads(int peer, uint32_t channel, PostPayload& post_payload) {
    std::deque<Handle>& queue = payload_queues_[{peer, channel}];
    while (!queue.empty()) {
      const Handle h = queue.front();
      Op* op = find_pending(h);
      if (op == nullptr) {  // failed meanwhile
        queue.pop_front();
        continue;
      }
      if (!op->header_ok) break;
      TG_RETURN_IF_ERROR(post_payload(h, *op));
      op->payload_posted = true;
      queue.pop_front();
      settle(*op);
    }
    return Status::ok();
  }

  std::unordered_map<Handle, Op> ops_;  // node-based: Transfer::wire keeps its address
  std::map<std::pair<int, uint32_t>, std::deque<Handle>> payload_queues_;  // receives, in order
  Handle next_handle_ = 1;
};

}  // namespace tidegate
