// The wire header: a fixed little-endian encoding, and checks that name the differing field.
#include <gtest/gtest.h>

#include "base/wire_header.h"

namespace tidegate {
namespace {

WireHeader sample() {
  WireHeader h;
  h.op_kind = OpKind::kAllreduce;
  h.dtype = TIDEGATE_FLOAT32;
  h.reduce_op = TIDEGATE_SUM;
  h.comm_id = 0x1122334455667788ULL;
  h.op_seq = 7;
  h.count = (int64_t{1} << 33) + 5;  // beyond 2^32: counts are 64-bit on the wire
  h.chunk = 3;
  h.aux = -1;
  h.payload_bytes = 4096;
  h.sender_rank = 2;
  return h;
}

TEST(WireHeader, RoundTripsEveryField) {
  unsigned char bytes[kWireHeaderBytes];
  encode_wire_header(sample(), bytes);
  EXPECT_EQ(bytes[0], 0x54);  // 'T', little-endian magic
  WireHeader back = decode_wire_header(bytes);
  EXPECT_TRUE(check_wire_header(sample(), back, 1, 2).is_ok());
  EXPECT_EQ(back.count, sample().count);
  EXPECT_EQ(back.aux, -1);
}

TEST(WireHeader, MismatchNamesRanksOpAndField) {
  WireHeader theirs = sample();
  theirs.count = 100;
  Status st = check_wire_header(sample(), theirs, 1, 2);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_MISMATCH);
  EXPECT_NE(st.message().find("allreduce op #7"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos);
  EXPECT_NE(st.message().find("rank 2"), std::string::npos);
  EXPECT_NE(st.message().find("field 'count'"), std::string::npos);
}

TEST(WireHeader, EachFieldIsChecked) {
  struct Case {
    const char* field;
    void (*mutate)(WireHeader&);
    tidegate_status_t code;
  };
  const Case cases[] = {
      {"magic", [](WireHeader& h) { h.magic = 1; }, TIDEGATE_ERR_PROTOCOL},
      {"version", [](WireHeader& h) { h.version = 9; }, TIDEGATE_ERR_PROTOCOL},
      {"communicator", [](WireHeader& h) { h.comm_id = 1; }, TIDEGATE_ERR_PROTOCOL},
      {"sender", [](WireHeader& h) { h.sender_rank = 0; }, TIDEGATE_ERR_PROTOCOL},
      {"op_seq", [](WireHeader& h) { h.op_seq = 8; }, TIDEGATE_ERR_MISMATCH},
      {"op kind", [](WireHeader& h) { h.op_kind = OpKind::kBroadcast; }, TIDEGATE_ERR_MISMATCH},
      {"dtype", [](WireHeader& h) { h.dtype = TIDEGATE_INT64; }, TIDEGATE_ERR_MISMATCH},
      {"reduce op", [](WireHeader& h) { h.reduce_op = TIDEGATE_MAX; }, TIDEGATE_ERR_MISMATCH},
      {"chunk", [](WireHeader& h) { h.chunk = 4; }, TIDEGATE_ERR_MISMATCH},
      {"payload bytes", [](WireHeader& h) { h.payload_bytes = 1; }, TIDEGATE_ERR_MISMATCH},
      {"codec", [](WireHeader& h) { h.codec_id = 3; }, TIDEGATE_ERR_MISMATCH},
  };
  for (const Case& c : cases) {
    WireHeader theirs = sample();
    c.mutate(theirs);
    Status st = check_wire_header(sample(), theirs, 1, 2);
    EXPECT_EQ(st.code(), c.code) << c.field << ": " << st.message();
  }
}

}  // namespace
}  // namespace tidegate
