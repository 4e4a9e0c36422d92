#include "api/rendezvous_host.h"

#include "base/host_identity.h"
#include "base/socket_util.h"

namespace tidegate {

Status choose_store_host(const Config& config, const std::vector<std::string>& identities,
                         StoreHostChoice* choice) {
  if (!config.raw("TIDEGATE_STORE_ADDR").empty()) {
    int port = 0;
    choice->why = "TIDEGATE_STORE_ADDR=" + config.raw("TIDEGATE_STORE_ADDR");
    return parse_host_port(config.raw("TIDEGATE_STORE_ADDR"), &choice->host, &port);
  }
  if (!config.raw("TIDEGATE_TCP_IFACE").empty()) {
    choice->why = "the address of TIDEGATE_TCP_IFACE=" + config.raw("TIDEGATE_TCP_IFACE");
    return interface_address(config.raw("TIDEGATE_TCP_IFACE"), &choice->host);
  }
  if (config.raw("TIDEGATE_TCP_ADDR") != "auto") {
    choice->host = config.raw("TIDEGATE_TCP_ADDR");
    choice->why = "TIDEGATE_TCP_ADDR=" + choice->host;
    return Status::ok();
  }
  bool one_host = true;
  for (const std::string& identity : identities) one_host &= identity == identities.front();
  if (one_host) {
    choice->host = "127.0.0.1";
    choice->why =
        "loopback, because every rank reported the same host (name, boot id and "
        "network namespace: " +
        identities.front() + ")";
    return Status::ok();
  }
  TG_RETURN_IF_ERROR(routable_address(&choice->host));
  choice->why = "an address of rank 0's host (" + host_name_of_identity(identities.front()) +
                "), because the ranks run on more than one host or network namespace";
  return Status::ok();
}

Status unreachable_store_error(const std::string& address, const std::string& why,
                               const Status& cause) {
  return Status(cause.code(),
                "could not reach the rendezvous store at " + address + " that rank 0 serves (" +
                    why + "): " + cause.message() +
                    ". Set TIDEGATE_STORE_ADDR to a host:port every rank can reach, or "
                    "TIDEGATE_TCP_IFACE to the network interface the ranks share");
}

}  // namespace tidegate
