// Small core pieces: status trails, block ranges, dtype tables.
#include <gtest/gtest.h>

#include "base/status.h"
#include "base/types.h"

namespace tidegate {
namespace {

Status inner() { return timeout_error("peer 3 is silent"); }
Status outer() {
  TG_RETURN_IF_ERROR(inner());
  return Status::ok();
}

TEST(Status, TrailRecordsEachLevel) {
  Status st = outer();
  EXPECT_EQ(st.code(), TIDEGATE_ERR_TIMEOUT);
  EXPECT_NE(st.message().find("peer 3 is silent"), std::string::npos);
  EXPECT_NE(st.message().find("core_test.cc:"), std::string::npos) << st.message();
  EXPECT_EQ(st.to_string().rfind("timeout: ", 0), 0u);
}

TEST(BlockRange, CoversEveryElementOnceWithTheFirstRanksLarger) {
  for (int size = 1; size <= 7; ++size) {
    for (int64_t count :
         {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 40) + 3}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        int64_t offset = 0, length = 0;
        block_range(count, size, r, &offset, &length);
        EXPECT_EQ(offset, next);
        EXPECT_EQ(length, count / size + (r < count % size ? 1 : 0));
        next = offset + length;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Types, DtypeSizesAndNames) {
  EXPECT_EQ(tidegate_dtype_size(TIDEGATE_BFLOAT16), 2u);
  EXPECT_EQ(tidegate_dtype_size(TIDEGATE_INT64), 8u);
  EXPECT_EQ(tidegate_dtype_size(static_cast<tidegate_dtype_t>(77)), 0u);
  EXPECT_STREQ(dtype_name(TIDEGATE_FLOAT16), "float16");
  EXPECT_FALSE(dtype_is_valid(7));
  EXPECT_TRUE(reduce_op_is_valid(TIDEGATE_PROD));
}

TEST(Deadline, RemainingNeverNegative) {
  Deadline past = Deadline::after_ms(-5);
  EXPECT_TRUE(past.passed());
  EXPECT_EQ(past.remaining().count(), 0);
  EXPECT_EQ(past.poll_timeout_ms(), 0);
}

}  // namespace
}  // namespace tidegate
