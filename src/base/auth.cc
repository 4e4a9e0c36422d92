#include "base/auth.h"

#include "base/auth_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/socket_util.h"

namespace tidegate {

namespace {
constexpr size_t kMaxSecretFileBytes = 4096;

std::string to_hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}
}  // namespace

Status random_bytes(size_t n, std::string* out) {
  out->assign(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out->data()), static_cast<int>(n)) != 1) {
    return internal_error("OpenSSL RAND_bytes failed: no secure randomness available");
  }
  return Status::ok();
}

bool starts_like_auth_magic(const std::string& bytes) {
  size_t n = std::min(bytes.size(), kAuthMagicBytes);
  return bytes.compare(0, n, kAuthMagic, n) == 0;
}

std::string client_proof(const Secret& secret, const char* role, const std::string& server_nonce,
                         const std::string& client_nonce) {
  return hmac_sha256(secret.text(), std::string("client") + role + server_nonce + client_nonce);
}

std::string server_proof(const Secret& secret, const char* role, const std::string& client_nonce,
                         const std::string& server_nonce) {
  return hmac_sha256(secret.text(), std::string("server") + role + client_nonce + server_nonce);
}

Status Secret::from_config(const Config& config, bool required, Secret* out) {
  const std::string& inline_secret = config.raw("TIDEGATE_SECRET");
  const std::string& file = config.raw("TIDEGATE_SECRET_FILE");
  if (!inline_secret.empty()) {
    *out = Secret::from_text(inline_secret);
    return Status::ok();
  }
  if (!file.empty()) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
      return config_error("TIDEGATE_SECRET_FILE '" + file +
                          "' cannot be read: " + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      return config_error("TIDEGATE_SECRET_FILE '" + file + "' is not a regular file");
    }
    if ((st.st_mode & 077) != 0) {
      return config_error("TIDEGATE_SECRET_FILE '" + file +
                          "' is readable by group or others; chmod 600 it");
    }
    if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kMaxSecretFileBytes) {
      return config_error("TIDEGATE_SECRET_FILE '" + file + "' must hold 1 to 4096 bytes");
    }
    std::ifstream in(file, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.empty()) return config_error("TIDEGATE_SECRET_FILE '" + file + "' is empty");
    *out = Secret::from_text(std::move(text));
    return Status::ok();
  }
  if (required) {
    return auth_error(
        "no job secret: set TIDEGATE_SECRET or TIDEGATE_SECRET_FILE (the same on "
        "every rank), or launch with tidegate-run, which sets one");
  }
  *out = Secret();
  return Status::ok();
}

Status Secret::random(Secret* out) {
  std::string bytes;
  TG_RETURN_IF_ERROR(random_bytes(32, &bytes));
  *out = Secret::from_text(to_hex(bytes));
  return Status::ok();
}

std::string hmac_sha256(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Status authenticate_server_side(int fd, const Secret& secret, const char* role, Deadline deadline) {
  if (secret.empty()) return auth_error("no job secret configured on the server side");
  std::string server_nonce;
  TG_RETURN_IF_ERROR(random_bytes(kNonceBytes, &server_nonce));
  std::string challenge(kAuthMagic, 4);
  challenge += server_nonce;
  TG_RETURN_IF_ERROR(
      write_full(fd, challenge.data(), challenge.size(), deadline, "auth challenge"));

  std::string reply(kAuthResponseBytes, '\0');
  TG_RETURN_IF_ERROR(read_full(fd, reply.data(), reply.size(), deadline, "auth response"));
  if (reply.compare(0, 4, kAuthMagic, 4) != 0) {
    return protocol_error("client " + peer_name(fd) + " does not speak the tidegate handshake");
  }
  const std::string client_nonce = reply.substr(4, kNonceBytes);
  const std::string client_mac = reply.substr(4 + kNonceBytes, kMacBytes);
  const std::string expected = client_proof(secret, role, server_nonce, client_nonce);
  if (!constant_time_equal(client_mac, expected)) {
    return auth_error("client " + peer_name(fd) + " failed authentication for '" + role +
                      "': its job secret differs from ours");
  }
  const std::string server_mac = server_proof(secret, role, client_nonce, server_nonce);
  TG_RETURN_IF_ERROR(write_full(fd, server_mac.data(), server_mac.size(), deadline, "auth proof"));
  return Status::ok();
}

Status authenticate_client_side(int fd, const Secret& secret, const char* role, Deadline deadline) {
  if (secret.empty()) return auth_error("no job secret configured on the client side");
  std::string challenge(kAuthChallengeBytes, '\0');
  TG_RETURN_IF_ERROR(read_full(fd, challenge.data(), challenge.size(), deadline, "auth challenge"));
  if (challenge.compare(0, 4, kAuthMagic, 4) != 0) {
    return protocol_error("server " + peer_name(fd) + " does not speak the tidegate handshake");
  }
  const std::string server_nonce = challenge.substr(4);
  std::string client_nonce;
  TG_RETURN_IF_ERROR(random_bytes(kNonceBytes, &client_nonce));
  std::string reply(kAuthMagic, 4);
  reply += client_nonce;
  reply += client_proof(secret, role, server_nonce, client_nonce);
  TG_RETURN_IF_ERROR(write_full(fd, reply.data(), reply.size(), deadline, "auth response"));

  std::string server_mac(kMacBytes, '\0');
  Status st = read_full(fd, server_mac.data(), server_mac.size(), deadline, "auth proof");
  if (st.code() == TIDEGATE_ERR_PEER_FAILED) {
    return auth_error("server " + peer_name(fd) + " rejected our job secret for '" + role +
                      "' (it closed the connection): every rank and the launcher must share the "
                      "same TIDEGATE_SECRET");
  }
  TG_RETURN_IF_ERROR(std::move(st));
  const std::string expected = server_proof(secret, role, client_nonce, server_nonce);
  if (!constant_time_equal(server_mac, expected)) {
    return auth_error("server " + peer_name(fd) + " failed to prove it knows the job secret");
  }
  return Status::ok();
}

}  // namespace tidegate
