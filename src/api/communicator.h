// A communicator: the ranks of one job, the transport connecting them and the progress engine
// that runs their collectives. Created collectively (every rank calls create with the same
// size), destroyed by each rank on its own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/compressed_args.h"
#include "base/auth.h"
#include "base/config.h"
#include "base/store.h"
#include "base/transport.h"
#include "collectives/collective_args.h"
#include "engine/progress_engine.h"
#include "engine/request.h"
#include "select/planner.h"

namespace tidegate {

class TcpStoreServer;

struct CommunicatorOptions {
  int rank = 0;
  int size = 1;
  Config config;
  Store* store = nullptr;      // borrowed for the duration of create(); keys get a comm prefix
  Secret secret;               // authenticates data connections; empty = rank 0 picks one
  std::string advertise_host;  // local address peers can reach (from the store connection)
  std::shared_ptr<void> keep_alive;  // e.g. the store server rank 0 hosts; released on destroy
  const void* mpi_comm = nullptr;    // MPI_Comm* from tidegate_comm_create_from_mpi (creation only)
};

class Communicator {
 public:
  // Rendezvous through options.store, agree on a communicator id, connect the transport and
  // start the progress thread. Collective over all ranks; bounded by TIDEGATE_TIMEOUT_MS.
  static Status create(CommunicatorOptions options, std::unique_ptr<Communicator>* out);

  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const Config& config() const { return config_; }
  // The transports this communicator connected, comma-separated ("tcp,ucx").
  std::string transport_names() const;
  // The agreed probe figures and the plan built from them.
  const ProbeProfile& probe_profile() const { return planner_->profile(); }
  const Planner& planner() const { return *planner_; }

  // Assigns the next op sequence number and queues the collective. Thread-safe; the posting
  // order across threads is the order they take the lock. `caller_waits`: the caller calls
  // wait() on the request next (a blocking collective).
  Status post(CollectiveArgs args, std::shared_ptr<Request>* request, bool caller_waits = false);

  // Waits for a request of this communicator, running the engine on this thread while no
  // other thread does (ProgressEngine::wait_running). Thread-safe.
  Status wait(const std::shared_ptr<Request>& request) { return engine_->wait_running(request); }

  // Runs `work` on the communicator's progress thread after every op posted before it has
  // finished and before any op posted after it starts (a local op: no message, no op number),
  // and waits for it (the ops before it are bounded by their deadlines). For the codec state:
  // save, load, reset, flush. Thread-safe.
  Status run_local(std::function<Status(CompressionState& state)> work);

  // Parsed codecs of the compressed allreduce, by spec.
  CodecCache& codecs() { return codecs_; }
  // TIDEGATE_CODECS, parsed at creation: the allow-list of codec "auto" when a call gives none.
  const std::vector<std::shared_ptr<const Codec>>& default_allowed_codecs() const {
    return default_allowed_codecs_;
  }

  // The sum-of-outer-products kernel's agreed speed (multiply-adds per microsecond, the slowest
  // rank's), measured at the first sufficient-factor allreduce that needs it; 0 before.
  double sfb_macs_per_us() const { return sfb_macs_per_us_.load(); }
  void set_sfb_macs_per_us(double value) { sfb_macs_per_us_.store(value); }

  // Fails everything pending, tells the peers, stops. Thread-safe.
  void abort(const std::string& reason);

  // Finishes the posted ops and closes connections; bounded by the configured timeout. Returns
  // the status of closing: OK for a communicator that had failed earlier (its collectives
  // reported that failure).
  Status shutdown();

  // "transport/algorithm" the plan would run for these arguments (benchmarks print it).
  std::string planned_choice_for(const CollectiveArgs& args) const;
  // Milliseconds the probe took at creation (0 when loaded from a cache or off).
  double creation_probe_ms() const { return planner_->profile().probe_ms; }

 private:
  Communicator() = default;
  // Connects the transports, probes them, plans, and meets every rank at a barrier.
  Status connect(const TransportContext& context, Store* store, Deadline deadline);
  // Probes the transports (or loads the cached profile) and builds the plan.
  Status make_planner(Store* store, const std::vector<Transport*>& transports, Deadline deadline);

  int rank_ = 0;
  int size_ = 1;
  uint64_t comm_id_ = 0;
  Config config_;
  std::shared_ptr<void> keep_alive_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<ProgressEngine> engine_;
  CodecCache codecs_;
  std::vector<std::shared_ptr<const Codec>> default_allowed_codecs_;
  std::atomic<double> sfb_macs_per_us_{0};
  std::mutex post_mutex_;
  uint64_t next_op_seq_ = 0;      // guarded by post_mutex_
  uint64_t posted_user_ops_ = 0;  // guarded by post_mutex_
  bool shut_down_ = false;
};

// The address this rank advertises to peers: TIDEGATE_TCP_IFACE's address, else
// TIDEGATE_TCP_ADDR, else the local address of the route to the store (works inside network
// namespaces too), else loopback when the store's address is unknown ("").
Status choose_advertise_host(const Config& config, const std::string& store_host, int store_port,
                             std::string* host);

// Communicator over the caller's store callbacks (tidegate_comm_create and _with_settings):
// `settings` are (variable, value) pairs applied over the environment, in order.
Status create_communicator_with_store(
    int rank, int size, const tidegate_store_t& callbacks,
    const std::vector<std::pair<std::string, std::string>>& settings,
    std::unique_ptr<Communicator>* out);

// Communicator from the environment (TIDEGATE_* and launcher variables; see config.cc).
Status create_communicator_from_env(std::unique_ptr<Communicator>* out);

// Communicator over an MPI communicator (transports/mpi); UNSUPPORTED without MPI.
Status create_communicator_from_mpi(const void* mpi_comm, std::unique_ptr<Communicator>* out);

}  // namespace tidegate
