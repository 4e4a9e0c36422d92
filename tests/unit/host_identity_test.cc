// "Same host" for the MPI rendezvous is decided from what is true (one kernel boot, one network
// namespace), not from host names, which containers and network namespaces often share; and a
// rank that cannot reach the store is told which address was tried and what fixes it.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "api/rendezvous_host.h"
#include "base/host_identity.h"

namespace tidegate {
namespace {

// local_host_identity() of a child process in a network namespace of its own (same host
// name, same kernel); "" when this process may not create one (not root).
std::string identity_in_new_network_namespace() {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return "";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(1);
    const std::string identity = local_host_identity();
    (void)!::write(pipe_fds[1], identity.data(), identity.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string identity;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) identity.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? identity : "";
}

TEST(HostIdentity, NamesTheKernelBootAndTheNetworkNamespace) {
  const std::string mine = local_host_identity();
  EXPECT_EQ(mine, local_host_identity());
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  EXPECT_EQ(host_name_of_identity(mine), name);
  EXPECT_EQ(mine.rfind(std::string(name) + "|", 0), 0u) << mine;
  const std::string other = identity_in_new_network_namespace();
  if (other.empty()) GTEST_SKIP() << "cannot create a network namespace here (needs root)";
  EXPECT_EQ(host_name_of_identity(other), host_name_of_identity(mine));
  EXPECT_NE(other, mine) << "a process in another network namespace cannot reach our loopback";
}

TEST(RendezvousHost, LoopbackOnlyWhenEveryRankSharesKernelAndNetworkNamespace) {
  Config config;
  StoreHostChoice choice;
  const std::string here = local_host_identity();
  ASSERT_TRUE(choose_store_host(config, {here, here, here}, &choice).is_ok());
  EXPECT_EQ(choice.host, "127.0.0.1");

  // Same host name, another network namespace (a container on this host): not loopback.
  const std::string name = host_name_of_identity(here);
  const std::vector<std::string> ranks = {here, name + "|" + "other-boot|1:2", here};
  Status st = choose_store_host(config, ranks, &choice);
  if (st.is_ok()) {
    EXPECT_NE(choice.host.rfind("127.", 0), 0u) << choice.host;
    EXPECT_NE(choice.why.find("more than one host"), std::string::npos) << choice.why;
  } else {
    // A host with only a loopback interface: the error says what to set.
    EXPECT_NE(st.message().find("TIDEGATE_TCP_IFACE"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("TIDEGATE_STORE_ADDR"), std::string::npos) << st.message();
  }
}

TEST(RendezvousHost, ConfigurationWins) {
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_STORE_ADDR", "10.9.8.7:4000").is_ok());
  StoreHostChoice choice;
  ASSERT_TRUE(choose_store_host(config, {"a|b|c", "d|e|f"}, &choice).is_ok());
  EXPECT_EQ(choice.host, "10.9.8.7");
  Config iface;
  ASSERT_TRUE(iface.set("TIDEGATE_TCP_IFACE", "lo").is_ok());
  ASSERT_TRUE(choose_store_host(iface, {"a|b|c", "d|e|f"}, &choice).is_ok());
  EXPECT_EQ(choice.host, "127.0.0.1");
}

TEST(RendezvousHost, UnreachableStoreErrorNamesTheAddressAndTheFix) {
  const Status st = unreachable_store_error("10.0.0.1:5555", "an address of rank 0's host",
                                            timeout_error("connect() timed out"));
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT);
  for (const char* words : {"10.0.0.1:5555", "TIDEGATE_STORE_ADDR", "TIDEGATE_TCP_IFACE",
                            "connect() timed out", "rank 0's host"}) {
    EXPECT_NE(st.message().find(words), std::string::npos) << words << ": " << st.message();
  }
}

}  // namespace
}  // namespace tidegate
