// The store's message encoding, byte by byte: every prefix of a valid request asks for more,
// and every oversize length is refused as soon as it is complete.
#include <gtest/gtest.h>

#include "bootstrap/tcp_store_protocol.h"

namespace tidegate {
namespace {

TEST(TcpStoreProtocol, SetRequestRoundTripsAndEveryPrefixNeedsMore) {
  const std::string encoded = encode_set_request("key", std::string("v\0l", 3));
  for (size_t n = 0; n < encoded.size(); ++n) {
    StoreRequest request;
    size_t consumed = 0;
    std::string error;
    EXPECT_EQ(parse_store_request(encoded.substr(0, n), &request, &consumed, &error),
              ParseOutcome::kNeedMore)
        << "prefix of " << n << " bytes";
  }
  StoreRequest request;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(parse_store_request(encoded + "next", &request, &consumed, &error),
            ParseOutcome::kComplete);
  EXPECT_EQ(consumed, encoded.size());
  EXPECT_EQ(request.kind, kStoreRequestSet);
  EXPECT_EQ(request.key, "key");
  EXPECT_EQ(request.value, std::string("v\0l", 3));
}

TEST(TcpStoreProtocol, GetRequestCarriesItsTimeout) {
  const std::string encoded = encode_get_request("k", 123456789012);
  StoreRequest request;
  size_t consumed = 0;
  std::string error;
  ASSERT_EQ(parse_store_request(encoded, &request, &consumed, &error), ParseOutcome::kComplete);
  EXPECT_EQ(request.kind, kStoreRequestGet);
  EXPECT_EQ(request.key, "k");
  EXPECT_EQ(request.timeout_ms, 123456789012);
  EXPECT_EQ(consumed, encoded.size());
}

TEST(TcpStoreProtocol, OversizeLengthsAndUnknownKindsAreInvalid) {
  StoreRequest request;
  size_t consumed = 0;
  std::string error;
  // Key length field alone, announcing one byte too many: refused before any key byte.
  std::string long_key = encode_set_request(std::string(kMaxStoreKeyBytes + 1, 'k'), "");
  EXPECT_EQ(parse_store_request(long_key.substr(0, 5), &request, &consumed, &error),
            ParseOutcome::kInvalid);
  EXPECT_NE(error.find("513"), std::string::npos) << error;
  std::string big_value = encode_set_request("k", std::string(kMaxStoreValueBytes + 1, 'v'));
  EXPECT_EQ(parse_store_request(big_value.substr(0, 10), &request, &consumed, &error),
            ParseOutcome::kInvalid);
  EXPECT_NE(error.find("'k'"), std::string::npos) << error;
  EXPECT_EQ(parse_store_request("Z", &request, &consumed, &error), ParseOutcome::kInvalid);
  std::string negative_timeout = encode_get_request("k", 0);
  negative_timeout.back() = static_cast<char>(0x80);  // top bit of the u64 timeout
  EXPECT_EQ(parse_store_request(negative_timeout, &request, &consumed, &error),
            ParseOutcome::kInvalid);
}

TEST(TcpStoreProtocol, ResponseHeaderIsCheckedAgainstTheCaps) {
  char status = 0;
  size_t length = 0;
  std::string ok = encode_store_response(kStoreResponseOk, "value");
  ASSERT_TRUE(decode_store_response_header(ok.data(), &status, &length).is_ok());
  EXPECT_EQ(status, kStoreResponseOk);
  EXPECT_EQ(length, 5u);

  std::string huge = encode_store_response(kStoreResponseOk, "");
  huge[4] = static_cast<char>(0x7f);  // announces ~2 GiB
  EXPECT_EQ(decode_store_response_header(huge.data(), &status, &length).code(),
            TIDEGATE_ERR_PROTOCOL);
  std::string long_error =
      encode_store_response(kStoreResponseError, std::string(kMaxStoreErrorBytes + 1, 'e'));
  EXPECT_EQ(decode_store_response_header(long_error.data(), &status, &length).code(),
            TIDEGATE_ERR_PROTOCOL);
  std::string unknown = encode_store_response('?', "");
  EXPECT_EQ(decode_store_response_header(unknown.data(), &status, &length).code(),
            TIDEGATE_ERR_PROTOCOL);
}

}  // namespace
}  // namespace tidegate
