#include "transfers.h"

#include <gtest/gtest.h>

namespace tidegate::conformance {

WireHeader message_header(const Rank& rank, int sender, uint64_t op_seq, uint32_t chunk,
                          size_t bytes) {
  WireHeader header;
  header.comm_id = rank.comm_id();
  header.op_kind = OpKind::kInternal;
  header.dtype = TIDEGATE_UINT8;
  header.op_seq = op_seq;
  header.count = static_cast<int64_t>(bytes);
  header.chunk = chunk;
  header.payload_bytes = bytes;
  header.sender_rank = static_cast<uint32_t>(sender);
  return header;
}

std::vector<unsigned char> pattern(int sender, int receiver, uint64_t seq, size_t bytes) {
  std::vector<unsigned char> data(bytes);
  uint64_t state = 0x9e3779b97f4a7c15ULL * (seq + 1) + static_cast<uint64_t>(sender) * 1000003 +
                   static_cast<uint64_t>(receiver) * 7919;
  for (size_t i = 0; i < bytes; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    data[i] = static_cast<unsigned char>(state >> 24);
  }
  return data;
}

Handle post_send_bytes(Rank& rank, int peer, uint32_t channel, const WireHeader& header,
                       MessageBuffer& payload, size_t bytes) {
  Handle handle = 0;
  const Status st = rank.transport().isend(peer, channel, header, payload.data(), bytes, &handle);
  EXPECT_TRUE(st.is_ok()) << "rank " << rank.rank() << ": isend to rank " << peer << " channel "
                          << channel << ": " << st.to_string();
  return st.is_ok() ? handle : 0;
}

Handle post_send(Rank& rank, int peer, uint32_t channel, const WireHeader& header,
                 MessageBuffer& payload) {
  return post_send_bytes(rank, peer, channel, header, payload, payload.size());
}

Handle post_recv(Rank& rank, int peer, uint32_t channel, const WireHeader& expected,
                 MessageBuffer& payload) {
  Handle handle = 0;
  const Status st =
      rank.transport().irecv(peer, channel, expected, payload.data(), payload.size(), &handle);
  EXPECT_TRUE(st.is_ok()) << "rank " << rank.rank() << ": irecv from rank " << peer << " channel "
                          << channel << ": " << st.to_string();
  return st.is_ok() ? handle : 0;
}

std::vector<Finished> wait_all(Transport& transport, const std::vector<Handle>& handles,
                               Deadline deadline) {
  std::vector<Finished> results(handles.size());
  size_t left = handles.size();
  while (left > 0 && !deadline.passed()) {
    bool activity = false;
    // A transport that failed as a whole fails its transfers too, which test() reports.
    (void)transport.progress(Milliseconds(10), &activity);
    for (size_t i = 0; i < handles.size(); ++i) {
      Finished& result = results[i];
      if (result.done) continue;
      bool done = false;
      size_t bytes = 0;
      Status st = transport.test(handles[i], &done, &bytes);
      if (!done && st.is_ok()) continue;
      result.done = true;
      result.status = std::move(st);
      result.bytes = bytes;
      --left;
    }
  }
  return results;
}

Finished wait_one(Transport& transport, Handle handle, Deadline deadline) {
  return wait_all(transport, {handle}, deadline)[0];
}

Status wait_for_failure(Transport& transport, Deadline deadline) {
  while (!deadline.passed()) {
    bool activity = false;
    Status st = transport.progress(Milliseconds(10), &activity);
    if (!st.is_ok()) return st;
  }
  return timeout_error("the transport did not fail before the test's deadline");
}

std::string failures(const std::vector<Finished>& finished) {
  std::string text;
  for (size_t i = 0; i < finished.size(); ++i) {
    if (!finished[i].status.is_ok())
      text += "[" + std::to_string(i) + "] " + finished[i].status.to_string() + "\n";
  }
  return text;
}

void expect_clean_close(Rank& rank) {
  const Status st = rank.transport().close(Deadline::after_ms(kWaitMs));
  EXPECT_TRUE(st.is_ok()) << "rank " << rank.rank() << ": close: " << st.to_string();
}

bool contains(const Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

}  // namespace tidegate::conformance
