// Test support for the TCP transport: worlds of N ranks as threads of this process, each with
// its own TcpTransport, rendezvousing through one in-memory store over loopback.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/auth.h"
#include "base/config.h"
#include "base/transport.h"
#include "bootstrap/memory_store.h"
#include "transports/tcp/tcp_transport.h"

namespace tidegate::tcp_testing {

inline constexpr uint64_t kCommId = 0x7e57c0de;
inline constexpr int64_t kTestTimeoutMs = 30000;

struct WorldOptions {
  int streams = 2;
  int64_t timeout_ms = kTestTimeoutMs;
  // Secret and communicator id per rank (to test refusals); defaults when empty.
  std::function<std::string(int rank)> secret_of;
  std::function<uint64_t(int rank)> comm_id_of;
  std::function<int64_t(int rank)> setup_timeout_ms_of;
  std::function<int(int rank)> streams_of;
};

// One rank's inputs, kept alive as long as its transport.
struct RankInputs {
  Config config;
  Secret secret;
  TransportContext context;
};

class TcpWorld {
 public:
  // Creates every rank's transport concurrently; statuses()[r] says how rank r fared.
  TcpWorld(int size, WorldOptions options = {});

  int size() const { return static_cast<int>(transports_.size()); }
  Transport& transport(int rank) { return *transports_[rank]; }
  tcp::TcpTransport& tcp(int rank) { return static_cast<tcp::TcpTransport&>(*transports_[rank]); }
  std::unique_ptr<Transport>& owned(int rank) { return transports_[rank]; }
  const std::vector<Status>& statuses() const { return statuses_; }
  bool all_ok() const;
  MemoryStore& store() { return store_; }

  // Starts the transport of one rank (used by tests that delay a rank).
  static Status create_rank(int rank, int size, const WorldOptions& options, Store* store,
                            RankInputs* inputs, std::unique_ptr<Transport>* out);

 private:
  MemoryStore store_;
  std::vector<RankInputs> inputs_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<Status> statuses_;
};

// Runs body(rank) on one thread per rank and joins them.
void run_ranks(int size, const std::function<void(int rank)>& body);

// Drives `transport` until every handle has finished or the deadline passed; returns each
// handle's status (TIMEOUT for those still pending, which stay owned by the transport).
std::vector<Status> wait_all(Transport& transport, const std::vector<Transport::Handle>& handles,
                             Deadline deadline);

// Drives `transport` until `condition` holds: OK then, progress()'s error if it fails first,
// TIMEOUT at the deadline.
Status progress_until(Transport& transport, const std::function<bool()>& condition,
                      Deadline deadline);

// Drives several transports from one thread (each progress() only polls) until `condition`.
Status pump_until(const std::vector<Transport*>& transports, const std::function<bool()>& condition,
                  Deadline deadline);

// The header a test message from `sender` carries (and a receiver expects).
WireHeader test_header(int sender, uint64_t op_seq, size_t bytes);

// Deterministic content for message `seq` from `sender` to `receiver`.
std::vector<unsigned char> pattern(int sender, int receiver, uint64_t seq, size_t bytes);

// Objects built on `size` ranks at once, threads meeting through one in-memory store, each by
// `build(context, &object)`: a collective set-up such as PeerExitWatch::create. The test checks
// every rank's status.
template <typename T>
struct RankObjects {
  using Build = std::function<Status(const TransportContext&, std::unique_ptr<T>*)>;

  RankObjects(int size, const std::string& secret, const Build& build)
      : inputs(static_cast<size_t>(size)),
        objects(static_cast<size_t>(size)),
        statuses(static_cast<size_t>(size)) {
    run_ranks(size, [&](int rank) {
      RankInputs& in = inputs[static_cast<size_t>(rank)];
      in.secret = Secret::from_text(secret);
      in.context.rank = rank;
      in.context.size = size;
      in.context.comm_id = kCommId;
      in.context.config = &in.config;
      in.context.store = &store;
      in.context.secret = &in.secret;
      in.context.deadline = Deadline::after_ms(kTestTimeoutMs);
      statuses[static_cast<size_t>(rank)] = build(in.context, &objects[static_cast<size_t>(rank)]);
    });
  }

  MemoryStore store;
  std::vector<RankInputs> inputs;
  std::vector<std::unique_ptr<T>> objects;
  std::vector<Status> statuses;
};

}  // namespace tidegate::tcp_testing
