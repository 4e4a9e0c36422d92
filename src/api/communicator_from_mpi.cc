// Communicator over an MPI communicator: rank 0 serves the rendezvous store and broadcasts its
// address and a fresh job secret over MPI (an already-trusted channel), so no environment set-up
// is needed under mpirun. Every rank then rendezvouses through the store as usual. The MPI calls
// themselves are the mpi transport's (transports/mpi/mpi_rendezvous.h); without MPI they
// return UNSUPPORTED.
#include <string>
#include <vector>

#include "api/communicator.h"
#include "base/socket_util.h"
#include "bootstrap/tcp_store.h"
#include "transports/mpi/mpi_rendezvous.h"

namespace tidegate {

namespace {

constexpr size_t kMessageBytes = 1024;

// Where rank 0 binds the store: the configured address or interface; loopback when every
// rank runs on this host; else the address this host's name resolves to.
Status choose_store_host(const Config& config, const std::vector<std::string>& host_names,
                         std::string* host) {
  if (!config.raw("TIDEGATE_STORE_ADDR").empty()) {
    int port = 0;
    return parse_host_port(config.raw("TIDEGATE_STORE_ADDR"), host, &port);
  }
  if (!config.raw("TIDEGATE_TCP_IFACE").empty()) {
    return interface_address(config.raw("TIDEGATE_TCP_IFACE"), host);
  }
  if (config.raw("TIDEGATE_TCP_ADDR") != "auto") {
    *host = config.raw("TIDEGATE_TCP_ADDR");
    return Status::ok();
  }
  bool single_host = true;
  for (const std::string& name : host_names) single_host &= name == host_names.front();
  if (single_host) {
    *host = "127.0.0.1";
    return Status::ok();
  }
  // A routable address of this host: the source address towards its own resolved name.
  return route_source_address(host_names.front(), 9, host);
}

// Rank 0's part: start the store, pack "address\nsecret" (or "!error") for the broadcast.
std::string start_store_on_root(const Config& config, const std::vector<std::string>& host_names,
                                Secret* secret, std::shared_ptr<void>* keep_alive) {
  std::string host;
  Status st = choose_store_host(config, host_names, &host);
  int port = 0;
  if (st.is_ok() && !config.raw("TIDEGATE_STORE_ADDR").empty()) {
    std::string ignored;
    st = parse_host_port(config.raw("TIDEGATE_STORE_ADDR"), &ignored, &port);
  }
  if (st.is_ok() && secret->empty()) st = Secret::random(secret);
  std::unique_ptr<TcpStoreServer> server;
  if (st.is_ok()) st = TcpStoreServer::start(host, port, *secret, &server);
  if (!st.is_ok()) return "!" + st.to_string();
  std::string message = server->address() + "\n" + secret->text();
  *keep_alive = std::shared_ptr<TcpStoreServer>(server.release(), [](TcpStoreServer* s) {
    s->stop();
    delete s;
  });
  return message;
}

}  // namespace

Status create_communicator_from_mpi(const void* mpi_comm, std::unique_ptr<Communicator>* out) {
  CommunicatorOptions options;
  std::vector<std::string> host_names;
  TG_RETURN_IF_ERROR(mpi_rendezvous_ranks(mpi_comm, &options.rank, &options.size, &host_names));
  TG_RETURN_IF_ERROR(Config::from_environment(&options.config));
  TG_RETURN_IF_ERROR(Secret::from_config(options.config, /*required=*/false, &options.secret));

  std::string message;
  if (options.rank == 0) {
    message = start_store_on_root(options.config, host_names, &options.secret, &options.keep_alive);
    if (message.size() >= kMessageBytes) message = "!rendezvous address too long: " + message;
    message.resize(std::min(message.size(), kMessageBytes - 1));
  }
  TG_RETURN_IF_ERROR(mpi_rendezvous_broadcast(mpi_comm, kMessageBytes, &message));
  if (!message.empty() && message[0] == '!') {
    return Status(TIDEGATE_ERR_SYSTEM,
                  "rank 0 could not start the rendezvous store: " + message.substr(1));
  }
  const size_t newline = message.find('\n');
  TG_CHECK_INTERNAL(newline != std::string::npos);
  const std::string address = message.substr(0, newline);
  options.secret = Secret::from_text(message.substr(newline + 1));

  std::string store_host;
  int store_port = 0;
  TG_RETURN_IF_ERROR(parse_host_port(address, &store_host, &store_port));
  std::unique_ptr<Store> store;
  TG_RETURN_IF_ERROR(connect_tcp_store(address, options.secret,
                                       Deadline::after_ms(options.config.timeout_ms()), &store));
  TG_RETURN_IF_ERROR(
      choose_advertise_host(options.config, store_host, store_port, &options.advertise_host));
  // Each MPI-created communicator gets its own fresh store, so no key scoping is needed.
  options.store = store.get();
  options.mpi_comm = mpi_comm;  // the mpi transport duplicates it; it outlives create()
  return Communicator::create(std::move(options), out);
}

}  // namespace tidegate
