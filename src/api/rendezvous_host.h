// Where rank 0 binds the rendezvous store of tidegate_comm_create_from_mpi, decided from what
// every rank reported about its host (base/host_identity.h) before any rank tries to connect.
#pragma once

#include <string>
#include <vector>

#include "base/config.h"
#include "base/status.h"

namespace tidegate {

struct StoreHostChoice {
  std::string host;  // the address rank 0 binds and every rank connects to
  std::string why;   // how it was chosen, for error messages ("every rank runs on ...")
};

// TIDEGATE_STORE_ADDR's host when set; else TIDEGATE_TCP_IFACE's address; else
// TIDEGATE_TCP_ADDR unless it is "auto"; else 127.0.0.1 when every rank reported the same host
// identity (one kernel, one network namespace); else an address of rank 0's host that other
// hosts can reach (routable_address()). `identities` are local_host_identity() of every rank,
// in rank order; this runs on rank 0.
Status choose_store_host(const Config& config, const std::vector<std::string>& identities,
                         StoreHostChoice* choice);

// The error of a rank that could not reach the store at `address`: names the address, how it
// was chosen and the variables that fix it.
Status unreachable_store_error(const std::string& address, const std::string& why,
                               const Status& cause);

}  // namespace tidegate
