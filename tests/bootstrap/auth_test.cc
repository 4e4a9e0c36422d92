// The HMAC primitives and the blocking handshake helpers of auth.h, over a socketpair.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>
#include <string>

#include "base/auth.h"
#include "base/auth_proof.h"
#include "base/socket_util.h"

namespace tidegate {
namespace {

std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

TEST(Hmac, MatchesRfc4231TestCase2) {
  // RFC 4231 section 4.3: key "Jefe", data "what do ya want for nothing?".
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Hmac, DependsOnKeyAndMessage) {
  const std::string mac = hmac_sha256("key", "message");
  EXPECT_EQ(mac.size(), kMacBytes);
  EXPECT_NE(mac, hmac_sha256("key2", "message"));
  EXPECT_NE(mac, hmac_sha256("key", "message2"));
}

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(AuthProof, RoleAndDirectionChangeTheProof) {
  const Secret secret = Secret::from_text("s");
  const std::string n1(kNonceBytes, 'a');
  const std::string n2(kNonceBytes, 'b');
  EXPECT_NE(client_proof(secret, "store", n1, n2), client_proof(secret, "tcp", n1, n2));
  EXPECT_NE(client_proof(secret, "store", n1, n2), server_proof(secret, "store", n2, n1));
  EXPECT_TRUE(starts_like_auth_magic("TG"));
  EXPECT_FALSE(starts_like_auth_magic("GET /"));
}

// Runs the server side on one end of a socketpair (on another thread) and the client side on
// the other; the server end is closed when the server side fails, as a real server does.
struct HandshakeResult {
  Status server;
  Status client;
};

HandshakeResult run_handshake(const Secret& server_secret, const Secret& client_secret,
                              const char* server_role = "store",
                              const char* client_role = "store") {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd server_end(fds[0]);
  UniqueFd client_end(fds[1]);
  auto server = std::async(std::launch::async, [&] {
    Status st = authenticate_server_side(server_end.get(), server_secret, server_role,
                                         Deadline::after_ms(5'000));
    if (!st.is_ok()) server_end.reset();
    return st;
  });
  HandshakeResult result;
  result.client = authenticate_client_side(client_end.get(), client_secret, client_role,
                                           Deadline::after_ms(5'000));
  result.server = server.get();
  return result;
}

TEST(Handshake, SucceedsWithTheSameSecret) {
  HandshakeResult r = run_handshake(Secret::from_text("same"), Secret::from_text("same"));
  EXPECT_TRUE(r.server.is_ok()) << r.server.to_string();
  EXPECT_TRUE(r.client.is_ok()) << r.client.to_string();
}

TEST(Handshake, WrongSecretIsAuthErrorOnBothSides) {
  HandshakeResult r = run_handshake(Secret::from_text("right"), Secret::from_text("wrong"));
  EXPECT_EQ(r.server.code(), TIDEGATE_ERR_AUTH) << r.server.to_string();
  EXPECT_EQ(r.client.code(), TIDEGATE_ERR_AUTH) << r.client.to_string();
  EXPECT_NE(r.client.message().find("secret"), std::string::npos) << r.client.message();
}

TEST(Handshake, ProofForAnotherRoleIsRefused) {
  HandshakeResult r = run_handshake(Secret::from_text("s"), Secret::from_text("s"), "store", "tcp");
  EXPECT_EQ(r.server.code(), TIDEGATE_ERR_AUTH);
  EXPECT_EQ(r.client.code(), TIDEGATE_ERR_AUTH);
}

TEST(Handshake, EmptySecretIsRefusedBeforeAnyByte) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd a(fds[0]);
  UniqueFd b(fds[1]);
  EXPECT_EQ(authenticate_server_side(a.get(), Secret(), "store", Deadline::after_ms(100)).code(),
            TIDEGATE_ERR_AUTH);
  EXPECT_EQ(authenticate_client_side(b.get(), Secret(), "store", Deadline::after_ms(100)).code(),
            TIDEGATE_ERR_AUTH);
}

TEST(Handshake, SilentPeerTimesOutAtTheDeadline) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  UniqueFd client_end(fds[0]);
  UniqueFd silent_server(fds[1]);
  const Clock::time_point start = Clock::now();
  Status st = authenticate_client_side(client_end.get(), Secret::from_text("s"), "store",
                                       Deadline::after_ms(200));
  const auto elapsed = std::chrono::duration_cast<Milliseconds>(Clock::now() - start).count();
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT) << st.to_string();
  EXPECT_GE(elapsed, 200);
  EXPECT_LT(elapsed, 2'000);
}

}  // namespace
}  // namespace tidegate
