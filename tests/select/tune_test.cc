// The TIDEGATE_TUNE grammar (select/tune.h): what it accepts and how it rejects the rest.
#include "select/tune.h"

#include <gtest/gtest.h>

namespace tidegate {
namespace {

TEST(Tune, EmptyStringHasNoRules) {
  std::vector<TuneRule> rules(1);
  ASSERT_TRUE(parse_tune("", &rules).is_ok());
  EXPECT_TRUE(rules.empty());
}

TEST(Tune, ParsesTheDocumentedExample) {
  std::vector<TuneRule> rules;
  Status st = parse_tune("allreduce:0-64K:@recursive_doubling#allreduce:64K-inf:tcp:@ring", &rules);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].kind, OpKind::kAllreduce);
  EXPECT_EQ(rules[0].min_bytes, 0);
  EXPECT_EQ(rules[0].max_bytes, 64 * 1024);
  EXPECT_EQ(rules[0].algorithm, "recursive_doubling");
  EXPECT_EQ(rules[0].transport, "");
  EXPECT_FALSE(rules[0].memory.has_value());
  EXPECT_EQ(rules[0].text, "allreduce:0-64K:@recursive_doubling");
  EXPECT_EQ(rules[1].min_bytes, 64 * 1024);
  EXPECT_EQ(rules[1].max_bytes, INT64_MAX);
  EXPECT_EQ(rules[1].transport, "tcp");
  EXPECT_EQ(rules[1].algorithm, "ring");
}

TEST(Tune, ACodecFieldRunsToTheEndOfItsRule) {
  std::vector<TuneRule> rules;
  Status st = parse_tune(
      "allreduce:0-1M:codec=none#allreduce:1M-inf:host:codec=qsgd:bits=4,bucket=512", &rules);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].codec, "none");
  EXPECT_EQ(rules[0].max_bytes, 1024 * 1024);
  EXPECT_EQ(rules[1].codec, "qsgd:bits=4,bucket=512");
  EXPECT_EQ(rules[1].memory, TIDEGATE_MEMORY_HOST);
  EXPECT_EQ(rules[1].min_bytes, 1024 * 1024);
  // A rule of a codec alone covers every size of its collective.
  ASSERT_TRUE(parse_tune("allreduce:codec=fp16", &rules).is_ok());
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].codec, "fp16");
  EXPECT_EQ(rules[0].max_bytes, INT64_MAX);
  st = parse_tune("allreduce:0-1M:codec=", &rules);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("codec="), std::string::npos) << st.message();
}

TEST(Tune, AcceptsEveryFieldKindInAnyOrder) {
  std::vector<TuneRule> rules;
  Status st = parse_tune("all:cuda:nccl#broadcast:@binomial:2G-2G:host#barrier:mpi", &rules);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_FALSE(rules[0].kind.has_value());
  EXPECT_EQ(rules[0].memory, TIDEGATE_MEMORY_CUDA);
  EXPECT_EQ(rules[0].transport, "nccl");
  EXPECT_EQ(rules[1].kind, OpKind::kBroadcast);
  EXPECT_EQ(rules[1].min_bytes, int64_t{2} << 30);
  EXPECT_EQ(rules[1].max_bytes, int64_t{2} << 30);
  EXPECT_EQ(rules[1].memory, TIDEGATE_MEMORY_HOST);
  EXPECT_EQ(rules[2].kind, OpKind::kBarrier);
}

TEST(Tune, AcceptsUnknownTransportNames) {
  // Only the plan knows which transports exist; it checks them.
  std::vector<TuneRule> rules;
  ASSERT_TRUE(parse_tune("alltoallv:shm9", &rules).is_ok());
  EXPECT_EQ(rules[0].transport, "shm9");
}

TEST(Tune, EveryCollectiveNameIsATarget) {
  for (const char* name : {"allreduce", "reduce_scatter", "allgather", "allgatherv", "broadcast",
                           "barrier", "alltoallv"}) {
    std::vector<TuneRule> rules;
    EXPECT_TRUE(parse_tune(std::string(name) + ":host", &rules).is_ok()) << name;
    ASSERT_EQ(rules.size(), 1u);
    EXPECT_STREQ(op_kind_name(*rules[0].kind), name);
  }
}

// Parses `text`, expecting a CONFIG error whose message contains `expected`.
void expect_rejected(const std::string& text, const std::string& expected) {
  std::vector<TuneRule> rules;
  Status st = parse_tune(text, &rules);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG) << text;
  EXPECT_NE(st.message().find(expected), std::string::npos) << text << " -> " << st.message();
  EXPECT_TRUE(rules.empty()) << text;
}

TEST(Tune, RejectsAnEmptyRange) {
  expect_rejected("allreduce:64K-1K",
                  "TIDEGATE_TUNE rule 'allreduce:64K-1K' has an empty size range (64K > 1K)");
}

TEST(Tune, RejectsUnknownCollectives) {
  expect_rejected("allreduze:@ring",
                  "rule 'allreduze:@ring' starts with 'allreduze', which is "
                  "not a collective (expected all, allreduce,");
  expect_rejected("Allreduce:@ring", "not a collective");
  expect_rejected(":@ring", "not a collective");
  expect_rejected("internal:@ring", "not a collective");
}

TEST(Tune, RejectsMalformedRanges) {
  expect_rejected("allreduce:64K", "'64K', which is not a size range (expected a size range");
  expect_rejected("allreduce:1X-2K", "lower bound '1X' is not a size");
  expect_rejected("allreduce:0-huge", "upper bound 'huge' is not a size or inf");
  expect_rejected("allreduce:0-", "upper bound '' is not a size or inf");
  expect_rejected("allreduce:inf-0", "unknown field 'inf-0'");
}

TEST(Tune, RejectsUnknownAndDuplicateFields) {
  expect_rejected("allreduce:Tcp", "has an unknown field 'Tcp' (expected a size range");
  expect_rejected("allreduce:algo=ring", "unknown field 'algo=ring'");
  expect_rejected("allreduce: tcp", "unknown field ' tcp'");
  expect_rejected("allreduce:@", "'@', which is not @algorithm");
  expect_rejected("allreduce:@Ring", "not @algorithm");
  expect_rejected("allreduce:tcp:mpi", "has more than one transport ('mpi')");
  expect_rejected("allreduce:@ring:@rabenseifner", "more than one algorithm");
  expect_rejected("allreduce:0-1K:2K-4K", "more than one size range");
  expect_rejected("allreduce:host:cuda", "more than one memory kind");
}

TEST(Tune, RejectsEmptyRulesAndFields) {
  expect_rejected("allreduce", "rule 'allreduce' has no field after the collective");
  expect_rejected("allreduce:", "has an empty field");
  expect_rejected("allreduce:tcp#", "TIDEGATE_TUNE has an empty rule");
  expect_rejected("allreduce:tcp##all:mpi", "empty rule");
  expect_rejected("#allreduce:tcp", "empty rule");
}

TEST(Tune, AnErrorInALaterRuleRejectsTheWholeString) {
  expect_rejected("allreduce:tcp#allgather:1M-0", "rule 'allgather:1M-0' has an empty size range");
}

}  // namespace
}  // namespace tidegate
