// The pieces of auth.h's handshake that do not touch a socket: the wire constants, nonce
// generation and the two HMAC proofs. authenticate_server_side/_client_side (auth.cc) run them
// over a blocking socket; the store server (tcp_store_server.cc) runs them inside its event loop,
// where a blocking handshake would let one silent client stall every other. Keeping the proof
// formulas here, once, means the two paths cannot drift apart.
#pragma once

#include <cstddef>
#include <string>

#include "base/auth.h"
#include "base/status.h"

namespace tidegate {

inline constexpr char kAuthMagic[4] = {'T', 'G', 'A', '1'};
inline constexpr size_t kAuthMagicBytes = sizeof kAuthMagic;
// server -> client: magic | server_nonce
inline constexpr size_t kAuthChallengeBytes = kAuthMagicBytes + kNonceBytes;
// client -> server: magic | client_nonce | client proof
inline constexpr size_t kAuthResponseBytes = kAuthMagicBytes + kNonceBytes + kMacBytes;

// n bytes from OpenSSL's CSPRNG; INTERNAL error when the OS has no randomness to give.
Status random_bytes(size_t n, std::string* out);

// True when `bytes` starts with (a prefix of) the magic: lets a server refuse garbage as soon
// as the first bytes arrive instead of waiting for a whole response.
bool starts_like_auth_magic(const std::string& bytes);

// HMAC(secret, "client" | role | server_nonce | client_nonce): the client's proof.
std::string client_proof(const Secret& secret, const char* role, const std::string& server_nonce,
                         const std::string& client_nonce);
// HMAC(secret, "server" | role | client_nonce | server_nonce): the server's proof.
std::string server_proof(const Secret& secret, const char* role, const std::string& client_nonce,
                         const std::string& server_nonce);

}  // namespace tidegate
