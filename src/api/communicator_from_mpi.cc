// Communicator over an MPI communicator: rank 0 serves the rendezvous store and broadcasts its
// address and a fresh job secret over MPI (an already-trusted channel), so no environment set-up
// is needed under mpirun. Every rank then rendezvouses through the store as usual. The MPI calls
// themselves are the mpi transport's (transports/mpi/mpi_rendezvous.h); without MPI they
// return UNSUPPORTED.
#include <algorithm>
#include <string>
#include <vector>

#include "api/communicator.h"
#include "api/rendezvous_host.h"
#include "base/host_identity.h"
#include "base/socket_util.h"
#include "bootstrap/tcp_store.h"
#include "transports/mpi/mpi_rendezvous.h"

namespace tidegate {

namespace {

constexpr size_t kMessageBytes = 1024;

// Rank 0's part: start the store, pack "address\nsecret\nhow the address was chosen" (or
// "!error") for the broadcast.
std::string start_store_on_root(const Config& config, const std::vector<std::string>& identities,
                                Secret* secret, std::shared_ptr<void>* keep_alive) {
  StoreHostChoice choice;
  Status st = choose_store_host(config, identities, &choice);
  int port = 0;
  if (st.is_ok() && !config.raw("TIDEGATE_STORE_ADDR").empty()) {
    std::string ignored;
    st = parse_host_port(config.raw("TIDEGATE_STORE_ADDR"), &ignored, &port);
  }
  if (st.is_ok() && secret->empty()) st = Secret::random(secret);
  std::unique_ptr<TcpStoreServer> server;
  if (st.is_ok()) st = TcpStoreServer::start(choice.host, port, *secret, config, &server);
  if (!st.is_ok()) {
    return "!" + std::move(st)
                     .with_context("binding " + choice.host + " (" + choice.why + "): ")
                     .to_string();
  }
  // The explanation goes last and is cut first, so the message fits its broadcast buffer.
  std::string message = server->address() + "\n" + secret->text() + "\n" + choice.why;
  message.resize(std::min(message.size(), kMessageBytes - 1));
  *keep_alive = std::shared_ptr<TcpStoreServer>(server.release(), [](TcpStoreServer* s) {
    s->stop();
    delete s;
  });
  return message;
}

}  // namespace

Status create_communicator_from_mpi(const void* mpi_comm, std::unique_ptr<Communicator>* out) {
  CommunicatorOptions options;
  std::vector<std::string> identities;
  TG_RETURN_IF_ERROR(mpi_rendezvous_ranks(mpi_comm, local_host_identity(), &options.rank,
                                          &options.size, &identities));
  TG_RETURN_IF_ERROR(Config::from_environment(&options.config));
  TG_RETURN_IF_ERROR(Secret::from_config(options.config, /*required=*/false, &options.secret));

  std::string message;
  if (options.rank == 0) {
    message = start_store_on_root(options.config, identities, &options.secret, &options.keep_alive);
    if (message.size() >= kMessageBytes) message = "!rendezvous address too long: " + message;
    message.resize(std::min(message.size(), kMessageBytes - 1));
  }
  TG_RETURN_IF_ERROR(mpi_rendezvous_broadcast(mpi_comm, kMessageBytes, &message));
  if (!message.empty() && message[0] == '!') {
    return Status(TIDEGATE_ERR_SYSTEM,
                  "rank 0 could not start the rendezvous store: " + message.substr(1));
  }
  const size_t first = message.find('\n');
  const size_t second = message.find('\n', first == std::string::npos ? first : first + 1);
  TG_CHECK_INTERNAL(first != std::string::npos && second != std::string::npos);
  const std::string address = message.substr(0, first);
  options.secret = Secret::from_text(message.substr(first + 1, second - first - 1));
  const std::string why = message.substr(second + 1);

  std::string store_host;
  int store_port = 0;
  TG_RETURN_IF_ERROR(parse_host_port(address, &store_host, &store_port));
  std::unique_ptr<Store> store;
  Status connected = connect_tcp_store(address, options.secret,
                                       Deadline::after_ms(options.config.timeout_ms()), &store);
  if (!connected.is_ok()) return unreachable_store_error(address, why, connected);
  TG_RETURN_IF_ERROR(
      choose_advertise_host(options.config, store_host, store_port, &options.advertise_host));
  // Each MPI-created communicator gets its own fresh store, so no key scoping is needed.
  options.store = store.get();
  options.mpi_comm = mpi_comm;  // the mpi transport duplicates it; it outlives create()
  return Communicator::create(std::move(options), out);
}

}  // namespace tidegate
