#include "tests/transport_tcp/tcp_test_util.h"

#include <gtest/gtest.h>

#include <thread>

namespace tidegate::tcp_testing {

Status TcpWorld::create_rank(int rank, int size, const WorldOptions& options, Store* store,
                             RankInputs* inputs, std::unique_ptr<Transport>* out) {
  const int streams = options.streams_of ? options.streams_of(rank) : options.streams;
  TG_RETURN_IF_ERROR(inputs->config.set("TIDEGATE_TCP_STREAMS", std::to_string(streams)));
  TG_RETURN_IF_ERROR(inputs->config.set("TIDEGATE_TIMEOUT_MS", std::to_string(options.timeout_ms)));
  inputs->secret =
      Secret::from_text(options.secret_of ? options.secret_of(rank) : "tcp-test-secret");
  TransportContext& ctx = inputs->context;
  ctx.rank = rank;
  ctx.size = size;
  ctx.comm_id = options.comm_id_of ? options.comm_id_of(rank) : kCommId;
  ctx.config = &inputs->config;
  ctx.store = store;
  ctx.secret = &inputs->secret;
  const int64_t setup_ms =
      options.setup_timeout_ms_of ? options.setup_timeout_ms_of(rank) : options.timeout_ms;
  ctx.deadline = Deadline::after_ms(setup_ms);
  return create_tcp_transport(ctx, out);
}

TcpWorld::TcpWorld(int size, WorldOptions options)
    : inputs_(static_cast<size_t>(size)),
      transports_(static_cast<size_t>(size)),
      statuses_(static_cast<size_t>(size)) {
  run_ranks(size, [&](int rank) {
    statuses_[rank] = create_rank(rank, size, options, &store_, &inputs_[rank], &transports_[rank]);
  });
}

bool TcpWorld::all_ok() const {
  for (const Status& st : statuses_) {
    if (!st.is_ok()) return false;
  }
  return true;
}

void run_ranks(int size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) threads.emplace_back(body, rank);
  for (std::thread& thread : threads) thread.join();
}

std::vector<Status> wait_all(Transport& transport, const std::vector<Transport::Handle>& handles,
                             Deadline deadline) {
  std::vector<Status> results(handles.size(),
                              timeout_error("transfer still pending at the deadline"));
  std::vector<bool> finished(handles.size(), false);
  size_t left = handles.size();
  while (left > 0 && !deadline.passed()) {
    bool activity = false;
    Status progressed = transport.progress(Milliseconds(20), &activity);
    for (size_t i = 0; i < handles.size(); ++i) {
      if (finished[i]) continue;
      bool done = false;
      Status st = transport.test(handles[i], &done);
      if (!done && st.is_ok()) continue;
      finished[i] = true;
      results[i] = st;
      --left;
    }
    // A failed transport (progressed not ok) has failed every pending transfer, which the
    // test() calls above report, so the loop ends without waiting for the deadline.
    (void)progressed;
  }
  return results;
}

Status progress_until(Transport& transport, const std::function<bool()>& condition,
                      Deadline deadline) {
  while (!condition()) {
    if (deadline.passed()) return timeout_error("condition not met before the test deadline");
    bool activity = false;
    TG_RETURN_IF_ERROR(transport.progress(Milliseconds(20), &activity));
  }
  return Status::ok();
}

Status pump_until(const std::vector<Transport*>& transports, const std::function<bool()>& condition,
                  Deadline deadline) {
  while (!condition()) {
    if (deadline.passed()) return timeout_error("condition not met before the test deadline");
    for (Transport* transport : transports) {
      bool activity = false;
      TG_RETURN_IF_ERROR(transport->progress(Milliseconds(0), &activity));
    }
  }
  return Status::ok();
}

WireHeader test_header(int sender, uint64_t op_seq, size_t bytes) {
  WireHeader header;
  header.comm_id = kCommId;
  header.op_kind = OpKind::kInternal;
  header.dtype = TIDEGATE_UINT8;
  header.op_seq = op_seq;
  header.count = static_cast<int64_t>(bytes);
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

}  // namespace tidegate::tcp_testing
