// The job secret and the HMAC-SHA256 challenge-response that every store and data connection
// runs before any other byte is trusted. Both sides prove knowledge of the secret with fresh
// nonces, so a recorded handshake cannot be replayed and the secret never crosses the wire.
//
// Handshake (all fields fixed-size, so nothing from the wire sizes an allocation):
//   server -> client: "TGA1" | server_nonce[32]
//   client -> server: "TGA1" | client_nonce[32] | HMAC(secret, "client" | role | server_nonce |
//   client_nonce) server -> client: HMAC(secret, "server" | role | client_nonce | server_nonce)
// `role` is a short label ("store", "tcp") so a proof for one service is useless for another.
#pragma once

#include <string>

#include "base/config.h"
#include "base/status.h"
#include "base/types.h"

namespace tidegate {

class Secret {
 public:
  Secret() = default;

  // From TIDEGATE_SECRET, else TIDEGATE_SECRET_FILE (rejected unless mode is 0600 or stricter
  // and it is a regular file). CONFIG error naming the problem; AUTH error when neither is set
  // and `required`.
  static Status from_config(const Config& config, bool required, Secret* out);
  // 32 random bytes from the OS CSPRNG (OpenSSL RAND_bytes), hex-encoded.
  static Status random(Secret* out);
  static Secret from_text(std::string text) {
    Secret s;
    s.text_ = std::move(text);
    return s;
  }

  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;

// Runs the server side of the handshake on a connected socket. AUTH error when the client's
// proof is wrong; PROTOCOL when it does not speak the protocol; TIMEOUT at the deadline.
Status authenticate_server_side(int fd, const Secret& secret, const char* role, Deadline deadline);
// Runs the client side; also verifies the server's proof (mutual authentication).
Status authenticate_client_side(int fd, const Secret& secret, const char* role, Deadline deadline);

// HMAC-SHA256 (exposed for tests).
std::string hmac_sha256(const std::string& key, const std::string& message);
// Constant-time comparison of equal-length byte strings.
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace tidegate
