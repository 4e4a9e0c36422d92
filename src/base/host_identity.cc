#include "base/host_identity.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "base/socket_util.h"

namespace tidegate {

namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

bool is_loopback_text(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1";
}

}  // namespace

std::string local_host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string identity = name;
  identity += "|" + first_line("/proc/sys/kernel/random/boot_id") + "|";
  struct stat ns {};
  if (::stat("/proc/self/ns/net", &ns) == 0) {
    identity += std::to_string(static_cast<unsigned long long>(ns.st_dev)) + ":" +
                std::to_string(static_cast<unsigned long long>(ns.st_ino));
  }
  return identity;
}

std::string host_name_of_identity(const std::string& identity) {
  return identity.substr(0, identity.find('|'));
}

Status routable_address(std::string* host) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string candidate;
  if (route_source_address(name, 9, &candidate).is_ok() && !is_loopback_text(candidate)) {
    *host = candidate;
    return Status::ok();
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return system_error("getifaddrs()", errno);
  Status result = config_error(
      "this host has no IPv4 address other hosts could reach (only loopback): set "
      "TIDEGATE_TCP_IFACE to the network interface the ranks share, or TIDEGATE_STORE_ADDR to a "
      "host:port every rank can reach");
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) continue;
    *host = text;
    result = Status::ok();
    break;
  }
  ::freeifaddrs(list);
  return result;
}

}  // namespace tidegate
