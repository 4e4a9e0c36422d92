// What "the same host" means when deciding whether a loopback address can connect two
// processes: they must run on one kernel (boot) and share a network namespace. A host name
// does not say that: containers and network namespaces often share one, and so do clones of
// one VM image. These helpers read what does say it, and find an address other hosts can reach.
#pragma once

#include <string>

#include "base/status.h"

namespace tidegate {

// "hostname|boot-id|netns-device:netns-inode" of this process: equal for two processes exactly
// when they run on the same kernel boot in the same network namespace. Parts that cannot be
// read (no /proc) are left empty; the host name alone then decides, as before.
std::string local_host_identity();

// The host name part of a local_host_identity() string.
std::string host_name_of_identity(const std::string& identity);

// An IPv4 address of this host that other hosts can reach, as far as this host can tell: the
// source address of the route to its own name when that is not a loopback address, else the
// first address of an interface that is up and not loopback. CONFIG error naming
// TIDEGATE_TCP_IFACE and TIDEGATE_STORE_ADDR when there is none.
Status routable_address(std::string* host);

}  // namespace tidegate
