// The configuration table: defaults are valid, bad values are refused with the variable named,
// and README.md's table is the one the code declares.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/config.h"

namespace tidegate {
namespace {

TEST(Config, DefaultsAreValidAndTyped) {
  Config config;
  EXPECT_EQ(config.timeout_ms(), 300000);
  EXPECT_EQ(config.tcp_streams(), 2);
  EXPECT_EQ(config.segment_bytes(), 1 << 20);
  EXPECT_EQ(config.recursive_doubling_max_bytes(), 16 << 10);
  EXPECT_EQ(config.forced_algorithm("allreduce"), "");
  for (const ConfigEntry& e : config_table()) {
    EXPECT_EQ(config.raw(e.env), e.default_value) << e.env;
    EXPECT_EQ(std::string(e.env).rfind("TIDEGATE_", 0), 0u) << e.env;
  }
}

TEST(Config, BadValuesNameTheVariableAndKeepThePreviousValue) {
  Config config;
  Status st = config.set("TIDEGATE_TIMEOUT_MS", "soon");
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("TIDEGATE_TIMEOUT_MS"), std::string::npos);
  EXPECT_EQ(config.timeout_ms(), 300000);
  EXPECT_EQ(config.set("TIDEGATE_TCP_STREAMS", "0").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_LOG_LEVEL", "loud").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_ALGO", "ring").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_NO_SUCH_THING", "1").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_SEGMENT_BYTES", "12").code(),
            TIDEGATE_ERR_CONFIG);  // below minimum
  EXPECT_EQ(config.set("TIDEGATE_SPIN_US", "-1").code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(config.set("TIDEGATE_SPIN_US", "100001").code(), TIDEGATE_ERR_CONFIG);  // over 0.1 s
  EXPECT_EQ(config.spin_us(), 100);
  ASSERT_TRUE(config.set("TIDEGATE_SPIN_US", "0").is_ok());  // sleep at once
  EXPECT_EQ(config.spin_us(), 0);
}

TEST(Config, AlgorithmOverridesParse) {
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_ALGO", "allreduce=ring,broadcast=binomial").is_ok());
  EXPECT_EQ(config.forced_algorithm("allreduce"), "ring");
  EXPECT_EQ(config.forced_algorithm("broadcast"), "binomial");
  EXPECT_EQ(config.forced_algorithm("allgather"), "");
}

TEST(Config, ByteSizes) {
  int64_t v = 0;
  EXPECT_TRUE(parse_byte_size("64K", &v));
  EXPECT_EQ(v, 65536);
  EXPECT_TRUE(parse_byte_size("1MiB", &v));
  EXPECT_EQ(v, 1 << 20);
  EXPECT_TRUE(parse_byte_size("3g", &v));
  EXPECT_EQ(v, int64_t{3} << 30);
  EXPECT_FALSE(parse_byte_size("", &v));
  EXPECT_FALSE(parse_byte_size("12Q", &v));
  EXPECT_FALSE(parse_byte_size("-1", &v));
  EXPECT_FALSE(parse_byte_size("99999999999999999999", &v));
}

TEST(Config, ReadmeTableMatchesTheCode) {
  std::ifstream in(TIDEGATE_README_PATH);
  ASSERT_TRUE(in) << "cannot open " << TIDEGATE_README_PATH;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(config_table_markdown()), std::string::npos)
      << "README.md's configuration table is out of date; replace it with the output of "
         "`tidegate-info --config-markdown`:\n"
      << config_table_markdown();
}

}  // namespace
}  // namespace tidegate
