// Spec strings: canonical forms, defaults, and CONFIG errors that name the spec, the key and
// the accepted values.
#include <gtest/gtest.h>

#include <string>

#include "compress/codec_spec.h"
#include "quantiser_test_util.h"

namespace tidegate {
namespace {

std::string spec_of(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  const Status st = make_codec(spec, &codec);
  return st.is_ok() ? codec->spec() : "error: " + st.message();
}

Status error_of(const std::string& spec) {
  std::unique_ptr<Codec> codec;
  return make_codec(spec, &codec);
}

void expect_config_error(const std::string& spec, std::initializer_list<const char*> mentions) {
  const Status st = error_of(spec);
  ASSERT_EQ(st.code(), TIDEGATE_ERR_CONFIG) << spec << " -> " << st.to_string();
  for (const char* m : mentions)
    EXPECT_NE(st.message().find(m), std::string::npos) << spec << ": " << st.message();
}

TEST(CodecSpec, DefaultsAreSpelledOutCanonically) {
  EXPECT_EQ(spec_of("none"), "none");
  EXPECT_EQ(spec_of("fp16"), "fp16");
  EXPECT_EQ(spec_of("bf16"), "bf16");
  EXPECT_EQ(spec_of("qsgd"), "qsgd:bits=4,bucket=512");
  EXPECT_EQ(spec_of("maxmin"), "maxmin:bits=4,bucket=512,rounding=stochastic");
  EXPECT_EQ(spec_of("terngrad"), "terngrad:bucket=512");
  EXPECT_EQ(spec_of("signsgd"), "signsgd");
  EXPECT_EQ(spec_of("efsign"), "efsign");
  EXPECT_EQ(spec_of("onebit"), "onebit:bucket=512");
}

TEST(CodecSpec, ParametersInAnyOrderWithBlanks) {
  EXPECT_EQ(spec_of("maxmin: rounding = nearest , bits=8"),
            "maxmin:bits=8,bucket=512,rounding=nearest");
  EXPECT_EQ(spec_of("qsgd:bucket=1024,bits=2"), "qsgd:bits=2,bucket=1024");
  EXPECT_EQ(spec_of("maxmin:bits=1,bucket=8"), "maxmin:bits=1,bucket=8,rounding=stochastic");
}

TEST(CodecSpec, CanonicalSpecsParseToThemselvesAndHashStably) {
  for (const std::string& name : registered_codecs()) {
    std::unique_ptr<Codec> codec;
    if (!make_codec(name, &codec).is_ok()) continue;  // codecs that need parameters
    const std::string canonical = codec->spec();
    EXPECT_EQ(spec_of(canonical), canonical);
    EXPECT_EQ(qtest::make(canonical)->config_hash(), codec->config_hash());
    EXPECT_STREQ(codec_name(codec->id()), name.c_str());
  }
  EXPECT_NE(qtest::make("qsgd:bits=4")->config_hash(), qtest::make("qsgd:bits=8")->config_hash());
}

TEST(CodecSpec, ErrorsNameTheSpecTheKeyAndTheAcceptedValues) {
  expect_config_error("", {"codec name is missing"});
  expect_config_error("zstd", {"\"zstd\"", "unknown codec", "qsgd", "maxmin"});
  expect_config_error("qsgd:bits=3", {"qsgd:bits=3", "bits=3", "2, 4 or 8"});
  expect_config_error("qsgd:bits=four", {"bits=four", "2, 4 or 8"});
  expect_config_error("maxmin:bits=9", {"bits=9", "from 1 to 8"});
  expect_config_error("maxmin:bucket=100", {"bucket=100", "multiple of 8"});
  expect_config_error("maxmin:bucket=0", {"bucket=0"});
  expect_config_error("maxmin:rounding=up", {"rounding=up", "stochastic or nearest"});
  expect_config_error("qsgd:bitz=4", {"qsgd:bitz=4", "no parameter \"bitz\"", "bits and bucket"});
  expect_config_error("fp16:bits=8", {"no parameter \"bits\"", "takes no parameters"});
  expect_config_error("qsgd:bits", {"\"bits\" is not key=value"});
  expect_config_error("qsgd:bits=4,", {"is not key=value"});
  expect_config_error("qsgd:bits=4,bits=8", {"given twice"});
  expect_config_error("terngrad:bucket=99999999999", {"bucket=99999999999", "from 8 to 16777216"});
}

TEST(CodecSpec, ParamsGetters) {
  std::string name;
  CodecParams params;
  ASSERT_TRUE(CodecParams::parse("x:ratio=0.25,on=yes,n=12", &name, &params).is_ok());
  EXPECT_EQ(name, "x");
  double ratio = 0;
  bool on = false;
  int64_t n = 0, absent = 0;
  EXPECT_TRUE(params.get_double("ratio", 1, 0, 1, &ratio).is_ok());
  EXPECT_EQ(ratio, 0.25);
  EXPECT_TRUE(params.get_bool("on", false, &on).is_ok());
  EXPECT_TRUE(on);
  EXPECT_TRUE(params.get_int("n", 0, 0, 100, &n).is_ok());
  EXPECT_EQ(n, 12);
  EXPECT_TRUE(params.get_int("absent", 5, 0, 10, &absent).is_ok());
  EXPECT_EQ(absent, 5);
  EXPECT_TRUE(params.finish().is_ok());
  EXPECT_EQ(params.get_double("ratio", 1, 0.5, 1, &ratio).code(), TIDEGATE_ERR_CONFIG);
}

}  // namespace
}  // namespace tidegate
