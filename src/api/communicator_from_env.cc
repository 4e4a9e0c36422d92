// Communicator creation from the environment: rank and size from TIDEGATE_RANK/SIZE or the
// launcher, the job secret from TIDEGATE_SECRET(_FILE), the store at TIDEGATE_STORE_ADDR
// (served by rank 0 or by an external launcher such as tidegate-run).
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "api/communicator.h"
#include "base/socket_util.h"
#include "bootstrap/rank_discovery.h"
#include "bootstrap/tcp_store.h"

namespace tidegate {

Status choose_advertise_host(const Config& config, const std::string& store_host, int store_port,
                             std::string* host) {
  if (!config.raw("TIDEGATE_TCP_IFACE").empty()) {
    return interface_address(config.raw("TIDEGATE_TCP_IFACE"), host);
  }
  if (config.raw("TIDEGATE_TCP_ADDR") != "auto") {
    *host = config.raw("TIDEGATE_TCP_ADDR");
    return Status::ok();
  }
  if (store_host.empty()) {
    *host = "127.0.0.1";
    return Status::ok();
  }
  return route_source_address(store_host, store_port, host);
}

// Communicators created one after another from the same environment use the same store, so
// each gets its own key prefix, "env<generation>/"; all ranks create them in the same order, so
// the n-th communicator of every rank has generation n. The count lives in two places, and the
// larger wins:
//  - in the store, one key per rank number, so that a rank restarted by its launcher (a new
//    process: tidegate-run --restarts) continues its predecessor's count and meets the
//    survivors' next communicator rather than their first;
//  - in the process, for a store that rank 0 serves and that is therefore new (and empty) for
//    each communicator, while a rank that reaches the old server before rank 0 stops it still
//    counts from the old keys.
namespace {
Status next_generation(Store* store, int rank, Deadline deadline, int* generation) {
  static std::atomic<int> created_by_this_process{0};
  const std::string key = "env-created/rank" + std::to_string(rank);
  std::string value;
  int in_store = 0;
  // A zero wait: the key is missing until this rank number's first creation.
  Status st = store->get(key, Deadline::after_ms(0), &value);
  if (st.is_ok()) {
    char* end = nullptr;
    const long parsed = std::strtol(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0' || parsed < 0 || parsed > (1L << 30)) {
      return protocol_error("the store's creation count for rank " + std::to_string(rank) +
                            " is not a number: '" + value + "'");
    }
    in_store = static_cast<int>(parsed);
  } else if (st.code() != TIDEGATE_ERR_TIMEOUT) {
    return st;
  }
  *generation = std::max(in_store, created_by_this_process.load());
  created_by_this_process.store(*generation + 1);
  if (deadline.passed()) return timeout_error("the rendezvous deadline passed");
  return store->set(key, std::to_string(*generation + 1));
}
}  // namespace

Status create_communicator_from_env(std::unique_ptr<Communicator>* out) {
  CommunicatorOptions options;
  TG_RETURN_IF_ERROR(Config::from_environment(&options.config));
  const Config& config = options.config;
  std::string source;
  TG_RETURN_IF_ERROR(discover_rank_and_size(config, &options.rank, &options.size, &source));
  TG_RETURN_IF_ERROR(Secret::from_config(config, /*required=*/true, &options.secret));

  std::string address = config.raw("TIDEGATE_STORE_ADDR");
  if (address.empty()) {
    return config_error(
        "TIDEGATE_STORE_ADDR is not set: give host:port of the rendezvous store "
        "(rank 0 serves it), or launch with tidegate-run, which sets it");
  }
  std::string store_host;
  int store_port = 0;
  TG_RETURN_IF_ERROR(parse_host_port(address, &store_host, &store_port));
  const Deadline deadline = Deadline::after_ms(config.timeout_ms());

  if (options.rank == 0 && config.raw("TIDEGATE_STORE_HOST") == "rank0") {
    std::unique_ptr<TcpStoreServer> server;
    TG_RETURN_IF_ERROR(
        TcpStoreServer::start(store_host, store_port, options.secret, config, &server));
    address = server->address();  // the real port when TIDEGATE_STORE_ADDR asked for port 0
    // The server must outlive every rank's rendezvous, so the communicator keeps it.
    options.keep_alive = std::shared_ptr<TcpStoreServer>(server.release(), [](TcpStoreServer* s) {
      s->stop();
      delete s;
    });
  }
  std::unique_ptr<Store> store;
  TG_RETURN_IF_ERROR(connect_tcp_store(address, options.secret, deadline, &store));

  int generation = 0;
  TG_RETURN_IF_ERROR(next_generation(store.get(), options.rank, deadline, &generation));
  std::unique_ptr<Store> scoped =
      make_prefix_store(store.get(), "env" + std::to_string(generation) + "/");
  options.store = scoped.get();
  TG_RETURN_IF_ERROR(
      choose_advertise_host(config, store_host, store_port, &options.advertise_host));
  return Communicator::create(std::move(options), out);
}

}  // namespace tidegate
