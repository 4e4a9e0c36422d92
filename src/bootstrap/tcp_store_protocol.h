// Encoding and decoding of the TCP store's request/response messages (the wire format is
// documented in tcp_store.h). Shared by the server and the client, and pure (no sockets), so
// that a fuzz target can feed it arbitrary bytes. Every length read from the wire is checked
// against store.h's caps before it is used to size anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/store.h"

namespace tidegate {

inline constexpr char kStoreRequestSet = 'S';
inline constexpr char kStoreRequestGet = 'G';
inline constexpr char kStoreResponseOk = 'K';
inline constexpr char kStoreResponseTimeout = 'T';
inline constexpr char kStoreResponseError = 'E';

// The server answers a get after at most this long even if the client asked for more; the
// client then asks again. It bounds how long a server holds a waiter for a client that died.
inline constexpr int64_t kMaxStoreGetWaitMs = 60'000;
// Error messages on the wire are short; anything longer is a protocol violation.
inline constexpr size_t kMaxStoreErrorBytes = 4096;
// Largest well-formed request: kind | key_len | key | value_len | value.
inline constexpr size_t kMaxStoreRequestBytes = 1 + 4 + kMaxStoreKeyBytes + 4 + kMaxStoreValueBytes;
// u8 status | u32 length.
inline constexpr size_t kStoreResponseHeaderBytes = 5;

struct StoreRequest {
  char kind = 0;  // kStoreRequestSet or kStoreRequestGet
  std::string key;
  std::string value;       // set only
  int64_t timeout_ms = 0;  // get only
};

enum class ParseOutcome {
  kNeedMore,  // the buffer holds only a prefix of a valid request
  kComplete,  // *request and *consumed are filled in
  kInvalid,   // the bytes can never become a valid request; *error says why
};

// Parses one request from the front of `buffer`. Rejects an unknown kind, a key or value over
// its cap, and a get timeout that is negative, as soon as the offending field is complete.
ParseOutcome parse_store_request(const std::string& buffer, StoreRequest* request, size_t* consumed,
                                 std::string* error);

std::string encode_set_request(const std::string& key, const std::string& value);
std::string encode_get_request(const std::string& key, int64_t timeout_ms);
std::string encode_store_response(char status, const std::string& payload);

// Decodes the 5-byte response header and checks the payload length against the cap for that
// status (a value for 'K', a message otherwise). PROTOCOL error on anything unexpected.
Status decode_store_response_header(const char* header, char* status, size_t* payload_bytes);

// Checks a key and value against the caps before they go on the wire (INVALID_ARGUMENT).
Status check_store_key(const std::string& key);
Status check_store_value(const std::string& key, const std::string& value);

}  // namespace tidegate
