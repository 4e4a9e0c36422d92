// select_probe_cluster: runs the bandwidth probe as one process per rank over the TCP
// transport, to check its figures on the emulated cluster (bench/cluster/emulate.sh), where
// each rank lives in its own network namespace behind a shaped link:
//
//   bench/cluster/emulate.sh -n 4 --rate 1gbit -- bash -c 'for r in $(seq 0 $((TGC_N-1)));
//     do a=$(cut -d, -f$((r+1)) <<<"$TGC_RANK_ADDRS"); ip netns exec $TGC_NS_PREFIX$r
//     build/tests/select/select_probe_cluster $r $TGC_N ${TGC_RANK_ADDRS%%,*}:29517 $a 800 &
//     done; wait'
//
// Rank 0 serves the store at the given address; rank 0 prints the agreed profile as JSON.
// Not part of ctest: it needs namespaces (root) and takes the real link's time.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/auth.h"
#include "base/log.h"
#include "bootstrap/tcp_store.h"
#include "select/probe.h"
#include "transports/tcp/tcp_transport.h"

namespace tidegate {
namespace {

constexpr int64_t kTimeoutMs = 30000;

Status run(int rank, int size, const std::string& store_address, const std::string& host,
           const std::string& budget_ms) {
  const Secret secret = Secret::from_text("probe-cluster-check");
  const Deadline deadline = Deadline::after_ms(kTimeoutMs);
  std::unique_ptr<TcpStoreServer> server;
  if (rank == 0) {
    const size_t colon = store_address.rfind(':');
    TG_RETURN_IF_ERROR(TcpStoreServer::start(store_address.substr(0, colon),
                                             std::atoi(store_address.substr(colon + 1).c_str()),
                                             secret, &server));
  }
  std::unique_ptr<Store> store;
  TG_RETURN_IF_ERROR(connect_tcp_store(store_address, secret, deadline, &store));
  // The environment still applies (TIDEGATE_LOG_LEVEL=debug shows the ring's sizes and times).
  Config config;
  TG_RETURN_IF_ERROR(Config::from_environment(&config));
  set_log_level(config.log_level());
  TG_RETURN_IF_ERROR(config.set("TIDEGATE_PROBE_BUDGET_MS", budget_ms));
  std::unique_ptr<Store> transport_store = make_prefix_store(store.get(), "tcp/");
  TransportContext context;
  context.rank = rank;
  context.size = size;
  context.comm_id = 0x9e0be;
  context.config = &config;
  context.store = transport_store.get();
  context.secret = &secret;
  context.deadline = deadline;
  context.advertise_host = host;
  std::unique_ptr<Transport> transport;
  TG_RETURN_IF_ERROR(create_tcp_transport(context, &transport));

  ProbeInputs inputs;
  inputs.rank = rank;
  inputs.size = size;
  inputs.comm_id = context.comm_id;
  inputs.config = &config;
  inputs.store = store.get();
  inputs.transports = {transport.get()};
  inputs.deadline = deadline;
  ProbeProfile profile;
  TG_RETURN_IF_ERROR(run_probe(inputs, &profile));
  if (rank == 0) std::printf("%s\n", profile.to_json().c_str());
  // Rank 0 keeps the store up until everyone has read the agreed profile.
  TG_RETURN_IF_ERROR(store->set("done/" + std::to_string(rank), "1"));
  if (rank == 0) {
    std::string ignored;
    for (int r = 1; r < size; ++r) {
      TG_RETURN_IF_ERROR(store->get("done/" + std::to_string(r), deadline, &ignored));
    }
  }
  return transport->close(Deadline::after_ms(5000));
}

}  // namespace
}  // namespace tidegate

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s RANK SIZE STORE_HOST:PORT MY_ADDRESS BUDGET_MS\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  tidegate::Status st = tidegate::run(rank, std::atoi(argv[2]), argv[3], argv[4], argv[5]);
  if (!st.is_ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, st.to_string().c_str());
    return 1;
  }
  return 0;
}
