// libFuzzer target: the TCP store's request parser and response header decoder
// (bootstrap/tcp_store_protocol.h) on arbitrary bytes, the way a server sees a client's stream.
// Seeds: corpus/store_protocol/. Checks, beyond ASan/UBSan:
//   - a complete request consumed at least one byte and at most what was there, and encodes
//     back to exactly those bytes (nothing is accepted that the client could not have sent);
//   - every prefix of a complete request needs more; nothing that could grow into a valid
//     request is refused, and nothing refused is accepted once more bytes arrive;
//   - keys and values stay within their caps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/tcp_store_protocol.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tidegate;
  std::string stream(reinterpret_cast<const char*>(data), size);
  // Requests one after another, as the server consumes them from a connection's input.
  for (int requests = 0; requests < 64 && !stream.empty(); ++requests) {
    StoreRequest request;
    size_t consumed = 0;
    std::string error;
    const ParseOutcome outcome = parse_store_request(stream, &request, &consumed, &error);
    if (outcome == ParseOutcome::kNeedMore) break;
    if (outcome == ParseOutcome::kInvalid) {
      check(!error.empty());
      // More bytes never turn an invalid request into a valid one.
      StoreRequest again;
      size_t again_consumed = 0;
      std::string again_error;
      check(parse_store_request(stream + std::string(16, '\0'), &again, &again_consumed,
                                &again_error) == ParseOutcome::kInvalid);
      break;
    }
    check(consumed > 0 && consumed <= stream.size());
    check(request.key.size() <= kMaxStoreKeyBytes && request.value.size() <= kMaxStoreValueBytes);
    const std::string encoded = request.kind == kStoreRequestSet
                                    ? encode_set_request(request.key, request.value)
                                    : encode_get_request(request.key, request.timeout_ms);
    check(encoded == stream.substr(0, consumed));
    for (size_t cut = 0; cut < consumed; cut += 1 + consumed / 16) {
      StoreRequest partial;
      size_t partial_consumed = 0;
      std::string partial_error;
      check(parse_store_request(stream.substr(0, cut), &partial, &partial_consumed,
                                &partial_error) == ParseOutcome::kNeedMore);
    }
    stream.erase(0, consumed);
  }
  // The client's side: a response header from an untrusted server.
  if (size >= kStoreResponseHeaderBytes) {
    char status = 0;
    size_t payload = 0;
    if (decode_store_response_header(reinterpret_cast<const char*>(data), &status, &payload)
            .is_ok()) {
      check(payload <= kMaxStoreValueBytes || payload <= kMaxStoreErrorBytes);
    }
  }
  return 0;
}
