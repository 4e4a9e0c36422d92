// The TCP store's bounds on what clients can take from the process that hosts it: descriptors
// (a flood of unauthenticated connections must not starve the job, and must not lock out an
// honest client), log lines (one refused connection, one line, does not scale to a flood), and
// memory (a client holding the secret cannot store without limit).
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "bootstrap/tcp_store_protocol.h"
#include "store_test_util.h"

namespace tidegate {
namespace {

using testing::connect_client;
using testing::connect_raw;
using testing::elapsed_ms;
using testing::read_until_closed;
using testing::start_server;

// Whether the server has closed `fd` (its read ends at once) rather than kept it open.
bool closed_by_server(int fd) {
  return read_until_closed(fd, Deadline::after_ms(300)).code() == TIDEGATE_ERR_PEER_FAILED;
}

TEST(TcpStoreLimits, UnauthenticatedConnectionsAreBoundedOldestDroppedFirst) {
  TcpStoreServerOptions options;
  options.descriptor_limit = 256;  // keeps 64; at most (256 - 64) / 2 = 96 unauthenticated
  auto server = start_server(options);
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 200; ++i) silent.push_back(connect_raw(*server));
  // An honest client still gets in, promptly.
  const Clock::time_point start = Clock::now();
  auto store = connect_client(*server);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("k", "v").is_ok());
  EXPECT_LT(elapsed_ms(start), 2'000);
  // The oldest went first; the newest are still held (until their handshake deadline).
  EXPECT_TRUE(closed_by_server(silent.front().get()));
  EXPECT_FALSE(closed_by_server(silent.back().get()));
  // A connection the server closed is readable (end of stream); one it holds is not.
  std::vector<pollfd> fds;
  for (const UniqueFd& fd : silent) fds.push_back({fd.get(), POLLIN, 0});
  ASSERT_GE(::poll(fds.data(), fds.size(), 0), 0);
  int open = 0;
  for (const pollfd& p : fds) open += p.revents == 0 ? 1 : 0;
  EXPECT_LE(open, 96);
  EXPECT_GT(open, 0);
  EXPECT_GE(server->rejected_connections(), 200 - 96);
}

// The process's real descriptor limit: a flood from another process, larger than what the
// limit leaves, must neither exhaust the host's descriptors nor lock an honest client out.
TEST(TcpStoreLimits, FloodBeyondTheDescriptorLimitLeavesRoomForTheJob) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto server = start_server();  // default options: the bounds come from getrlimit
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t flooder = ::fork();
  ASSERT_GE(flooder, 0);
  if (flooder == 0) {
    rlimit raised = saved;
    raised.rlim_cur = std::min<rlim_t>(saved.rlim_max, 4096);
    ::setrlimit(RLIMIT_NOFILE, &raised);
    std::vector<UniqueFd> held;
    std::string host;
    int port = 0;
    (void)parse_host_port(server->address(), &host, &port);
    for (int i = 0; i < 600; ++i) {
      UniqueFd fd;
      if (!connect_tcp(host, port, Deadline::after_ms(2'000), &fd).is_ok()) break;
      held.push_back(std::move(fd));
    }
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    ::sleep(20);  // held until killed
    ::_exit(0);
  }
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  // The server process still has descriptors to spare, and an honest client is served.
  int spare = ::dup(0);
  EXPECT_GE(spare, 0) << "the store left the process no descriptor";
  if (spare >= 0) ::close(spare);
  std::unique_ptr<Store> store;
  Status st = connect_tcp_store(server->address(), testing::test_secret(),
                                Deadline::after_ms(5'000), &store);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (store) {
    EXPECT_TRUE(store->set("after-flood", "ok").is_ok());
  }
  ::kill(flooder, SIGKILL);
  ::waitpid(flooder, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  server->stop();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

// Runs `body` with the process's stderr going to a file, and returns what was written.
template <typename Body>
std::string capture_stderr(Body&& body) {
  std::fflush(stderr);
  char path[] = "/tmp/tidegate-stderr-XXXXXX";
  const int file = ::mkstemp(path);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

int count_lines_with(const std::string& text, const std::string& needle) {
  int lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines += line.find(needle) != std::string::npos;
  return lines;
}

TEST(TcpStoreLimits, RefusalsAreLoggedWithABoundAndSummarised) {
  const std::string log = capture_stderr([] {
    auto server = start_server();
    for (int i = 0; i < 300; ++i) {
      UniqueFd raw = connect_raw(*server);
      const std::string junk = "GET / HTTP/1.1\r\n\r\n";
      ASSERT_TRUE(write_full(raw.get(), junk.data(), junk.size(), Deadline::after_ms(5'000), "junk")
                      .is_ok());
      (void)read_until_closed(raw.get(), Deadline::after_ms(5'000));
    }
    EXPECT_EQ(server->rejected_connections(), 300);
    server->stop();  // summarises what was counted
  });
  EXPECT_LE(count_lines_with(log, "refused connection from"), 6) << log.substr(0, 2000);
  EXPECT_EQ(count_lines_with(log, "more refused store connections"), 1) << log.substr(0, 2000);
  EXPECT_NE(log.find("(300 in all)"), std::string::npos) << log.substr(0, 2000);
}

TEST(TcpStoreLimits, SetsBeyondTheKeyCapAreRefusedAndNothingIsStored) {
  TcpStoreServerOptions options;
  options.max_keys = 20;
  auto server = start_server(options);
  auto store = connect_client(*server);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->set("k" + std::to_string(i), "v").is_ok());
  Status st = store->set("one-too-many", "v");
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("TIDEGATE_STORE_MAX_KEYS"), std::string::npos) << st.message();
  EXPECT_TRUE(store->set("k0", "overwriting is not a new key").is_ok());
  std::string value;
  auto reader = connect_client(*server);
  EXPECT_EQ(reader->get("one-too-many", Deadline::after_ms(100), &value).code(),
            TIDEGATE_ERR_TIMEOUT);
}

TEST(TcpStoreLimits, SetsBeyondTheByteCapAreRefusedAndFreedBytesCountAgain) {
  TcpStoreServerOptions options;
  options.max_total_bytes = 3 << 20;
  auto server = start_server(options);
  auto store = connect_client(*server);
  auto reader = connect_client(*server);
  ASSERT_NE(store, nullptr);
  ASSERT_NE(reader, nullptr);
  const std::string mib(size_t{1} << 20, 'x');
  ASSERT_TRUE(store->set("a", mib).is_ok());
  ASSERT_TRUE(store->set("b", mib).is_ok());
  Status st = store->set("c", mib);  // three MiB plus keys and overheads: over the cap
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("TIDEGATE_STORE_MAX_BYTES"), std::string::npos) << st.message();
  std::string value;
  EXPECT_EQ(reader->get("c", Deadline::after_ms(100), &value).code(), TIDEGATE_ERR_TIMEOUT);
  // Shrinking a value frees its bytes for others.
  ASSERT_TRUE(store->set("b", "small").is_ok());
  EXPECT_TRUE(store->set("c", mib).is_ok());
  ASSERT_TRUE(reader->get("c", Deadline::after_ms(1'000), &value).is_ok());
  EXPECT_EQ(value.size(), mib.size());
}

TEST(TcpStoreLimits, CapsComeFromTheConfiguration) {
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_STORE_MAX_BYTES", "2M").is_ok());
  ASSERT_TRUE(config.set("TIDEGATE_STORE_MAX_KEYS", "1000").is_ok());
  const TcpStoreServerOptions options = store_server_options(config);
  EXPECT_EQ(options.max_total_bytes, 2 << 20);
  EXPECT_EQ(options.max_keys, 1000);
  EXPECT_EQ(config.set("TIDEGATE_STORE_MAX_BYTES", "lots").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_STORE_MAX_KEYS", "-1").code(), TIDEGATE_ERR_CONFIG);
}

}  // namespace
}  // namespace tidegate
