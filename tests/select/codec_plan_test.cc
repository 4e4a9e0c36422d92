// The codec plan of codec "auto" (select/codec_plan.h) and its allow-lists
// (compress/codec_allow_list.h): compression ranks first only where the model says the wire
// saves more than the codec costs, dense is always in the list, a codec outside the allow-list
// never appears, TIDEGATE_TUNE codec rules force, and the same inputs give the same plan.
#include "select/codec_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "compress/codec_allow_list.h"
#include "select/tune.h"

namespace tidegate {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
using AllowList = std::vector<std::shared_ptr<const Codec>>;

// 4 ranks on one tcp link of `GBps` (1 Gbit/s = 0.125), every codec encoding and decoding at
// 2 GB/s, reductions at 10 GB/s.
PlanInputs link_inputs(double GBps, int size = 4) {
  PlanInputs in;
  in.size = size;
  in.profile.size = size;
  in.profile.reduce_GBps = 10;
  TransportFigures tcp;
  tcp.transport = "tcp";
  tcp.alpha_us = 50;
  tcp.bandwidth_GBps = GBps;
  in.profile.transports = {tcp};
  for (const char* family : {"fp16", "bf16", "qsgd", "maxmin", "terngrad", "signsgd", "efsign",
                             "onebit", "topk", "randomk", "threshold", "powersgd"}) {
    in.profile.codecs.push_back({family, 2.0, 2.0});
  }
  TransportOffer offer;
  offer.name = "tcp";
  offer.capabilities.host_memory = true;
  in.transports = {offer};
  return in;
}

AllowList allow(const std::string& text) {
  AllowList list;
  const Status st = parse_allow_list(text, "test", &list);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return list;
}

struct Built {
  Plan dense;
  CodecPlan codecs;
};

// The dense plan is kept beside the codec plan, which points at it.
std::unique_ptr<Built> build_ok(const PlanInputs& in, const AllowList& allowed) {
  auto built = std::make_unique<Built>();
  Status st = Plan::build(in, &built->dense);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  st = CodecPlan::build(in, built->dense, allowed, &built->codecs);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return built;
}

const CodecChoice& top(const CodecPlan& plan, int64_t bytes) {
  const CodecPlanEntry* e = plan.find(bytes);
  EXPECT_NE(e, nullptr) << bytes;
  return e->ranked.front();
}

const char* kThree = "fp16,qsgd:bits=4,bucket=512,topk:ratio=0.01";

TEST(CodecPlan, ASlowLinkCompressesLargeTensorsAndSendsSmallOnesDense) {
  const auto built = build_ok(link_inputs(0.125), allow(kThree));
  const CodecChoice& large = top(built->codecs, 64 * kMiB);
  ASSERT_FALSE(large.dense()) << built->codecs.to_table();
  // At 1 Gbit/s the codec's own cost is small beside the wire: the prediction beats dense's
  // by far (dense sends 2 (P-1)/P of 64 MiB at 125 MB/s, about 800 ms).
  const CodecChoice dense_choice;
  EXPECT_LT(built->codecs.cost(large, 64 * kMiB) * 2, built->codecs.cost(dense_choice, 64 * kMiB))
      << built->codecs.to_table();
  // A KiB is latency-bound: the identity check and the codecs' passes do not pay.
  EXPECT_TRUE(top(built->codecs, 1 * kKiB).dense()) << built->codecs.to_table();
}

// Re-planning judges an entry by what its ops measured, so an entry must not stretch from sizes
// where a codec's fixed costs decide to sizes where its wire savings do: past 4 KiB no entry
// spans more than a factor of 4, even where one ranking holds from 8 KiB to the top.
TEST(CodecPlan, EntriesPastFourKiBSpanAtMostAFactorOfFour) {
  const auto built = build_ok(link_inputs(0.125), allow(kThree));
  EXPECT_NE(built->codecs.find(16 * kKiB), built->codecs.find(64 * kMiB));
  for (const CodecPlanEntry& e : built->codecs.entries()) {
    if (e.max_bytes < 4 * kKiB || e.max_bytes == INT64_MAX) continue;
    EXPECT_LT(e.max_bytes, 4 * std::max<int64_t>(e.min_bytes, 1))
        << e.min_bytes << ".." << e.max_bytes << "\n"
        << built->codecs.to_table();
  }
}

TEST(CodecPlan, AFastLinkStaysDense) {
  // 100 GB/s: the 2 GB/s codecs cost more than the whole dense allreduce.
  const auto built = build_ok(link_inputs(100), allow(kThree));
  for (int64_t bytes : {4 * kKiB, 1 * kMiB, 64 * kMiB, 256 * kMiB}) {
    EXPECT_TRUE(top(built->codecs, bytes).dense()) << bytes << "\n" << built->codecs.to_table();
  }
}

TEST(CodecPlan, EveryEntryHoldsDenseAndOnlyAllowedCodecs) {
  const AllowList allowed = allow("qsgd:bits=4,bucket=512,topk:ratio=0.01");
  for (double GBps : {0.01, 0.125, 1.25, 100.0}) {
    const auto built = build_ok(link_inputs(GBps), allowed);
    ASSERT_FALSE(built->codecs.entries().empty());
    int64_t next = 0;
    for (const CodecPlanEntry& e : built->codecs.entries()) {
      EXPECT_EQ(e.min_bytes, next);  // the entries cover every size, in order
      next = e.max_bytes == INT64_MAX ? INT64_MAX : e.max_bytes + 1;
      bool has_dense = false;
      for (const CodecChoice& c : e.ranked) {
        if (c.dense()) {
          has_dense = true;
          continue;
        }
        bool listed = false;
        for (const auto& codec : allowed) listed = listed || codec->spec() == c.codec->spec();
        EXPECT_TRUE(listed) << c.name();
        EXPECT_TRUE(c.algorithm->runs(c.codec.get())) << c.name();
      }
      EXPECT_TRUE(has_dense) << e.min_bytes;
    }
    EXPECT_EQ(next, INT64_MAX);
  }
}

TEST(CodecPlan, AnEmptyAllowListIsDenseEverywhere) {
  const auto built = build_ok(link_inputs(0.01), AllowList{});
  for (const CodecPlanEntry& e : built->codecs.entries()) {
    ASSERT_EQ(e.ranked.size(), 1u);
    EXPECT_TRUE(e.ranked.front().dense());
  }
}

TEST(CodecPlan, WithoutAProbeOnlyTuneRulesCompress) {
  PlanInputs in = link_inputs(0.125);
  in.use_size_rule = true;
  const auto plain = build_ok(in, allow(kThree));
  EXPECT_TRUE(top(plain->codecs, 64 * kMiB).dense()) << plain->codecs.to_table();
  ASSERT_TRUE(parse_tune("allreduce:1M-inf:codec=qsgd:bits=4,bucket=512", &in.tune).is_ok());
  const auto tuned = build_ok(in, allow(kThree));
  EXPECT_EQ(top(tuned->codecs, 64 * kMiB).codec->spec(), "qsgd:bits=4,bucket=512");
  EXPECT_TRUE(tuned->codecs.find(64 * kMiB)->tuned);
  EXPECT_TRUE(top(tuned->codecs, 512 * kKiB).dense());
}

TEST(CodecPlan, TuneRulesForceACodecOrDenseInTheirRange) {
  PlanInputs in = link_inputs(0.125);
  ASSERT_TRUE(
      parse_tune("allreduce:0-inf:codec=fp16#allreduce:128M-inf:codec=none", &in.tune).is_ok());
  const auto built = build_ok(in, allow(kThree));
  EXPECT_EQ(top(built->codecs, 64 * kMiB).codec->spec(), "fp16") << built->codecs.to_table();
  EXPECT_EQ(top(built->codecs, 4 * kKiB).codec->spec(), "fp16");
  EXPECT_TRUE(top(built->codecs, 256 * kMiB).dense());
  // A forced codec keeps dense behind it, for re-planning's sake.
  EXPECT_TRUE(built->codecs.find(64 * kMiB)->ranked.back().dense());
}

TEST(CodecPlan, ATuneRuleForACodecOutsideTheAllowListIsAConfigError) {
  PlanInputs in = link_inputs(0.125);
  ASSERT_TRUE(parse_tune("allreduce:1M-inf:codec=onebit", &in.tune).is_ok());
  Plan dense;
  ASSERT_TRUE(Plan::build(in, &dense).is_ok());
  CodecPlan plan;
  const Status st = CodecPlan::build(in, dense, allow(kThree), &plan);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("onebit"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("allow-list"), std::string::npos) << st.message();
}

TEST(CodecPlan, TheSameInputsGiveTheSamePlanWhateverTheListOrder) {
  const auto a = build_ok(link_inputs(0.125), allow(kThree));
  const auto b = build_ok(link_inputs(0.125), allow("topk:ratio=0.01,fp16,qsgd:bits=4,bucket=512"));
  EXPECT_EQ(a->codecs.to_json(), b->codecs.to_json());
  EXPECT_EQ(a->codecs.to_table(), b->codecs.to_table());
}

TEST(CodecPlan, SlowerCodecsLoseTheirPlace) {
  // The same 1 Gbit link, but every codec at 0.01 GB/s: 64 MiB would take seconds to encode.
  PlanInputs in = link_inputs(0.125);
  for (CodecFigures& f : in.profile.codecs) f.encode_GBps = f.decode_GBps = 0.01;
  const auto built = build_ok(in, allow(kThree));
  EXPECT_TRUE(top(built->codecs, 64 * kMiB).dense()) << built->codecs.to_table();
}

// Top-k's two algorithms, with this machine's probe figures (top-k encodes at about 0.9 GB/s
// and decode-adds at about 27 GB/s, 4 ranks): where the selections are sparse, the sparse
// reduce-scatter moves more bytes than the allgather of payloads (its extra scatter, and the
// worst case of disjoint selections) and passes over the output as often, so it never ranks
// above it, on any link. It did at 10 Gbit and unshaped, where it measured 1.10-1.56x the
// allgather's time. Where the selections are dense enough that merged regions turn dense
// (top-k 50%), the capped gather wins it the slow link.
TEST(CodecPlan, TheSparseReduceScatterRanksAboveTheAllgatherOnlyWhereMergedRegionsTurnDense) {
  auto position = [](const CodecPlanEntry& e, const char* algorithm) {
    for (size_t i = 0; i < e.ranked.size(); ++i) {
      if (!e.ranked[i].dense() && e.ranked[i].algorithm->name == std::string(algorithm)) {
        return static_cast<int>(i);
      }
    }
    return -1;
  };
  for (const double GBps : {0.125, 1.25, 3.0}) {
    PlanInputs in = link_inputs(GBps);
    for (CodecFigures& f : in.profile.codecs) {
      if (f.codec == "topk") f = {"topk", 0.9, 27.0};
    }
    const auto built = build_ok(in, allow("topk:ratio=0.01"));
    for (const CodecPlanEntry& e : built->codecs.entries()) {
      const int gather = position(e, "allgather");
      const int scatter = position(e, "sparse_reduce_scatter");
      if (gather < 0 || scatter < 0) continue;
      EXPECT_LT(gather, scatter) << GBps << " GB/s, from " << e.min_bytes << " B\n"
                                 << built->codecs.to_table();
    }
    if (GBps != 0.125) continue;
    const auto dense_selection = build_ok(in, allow("topk:ratio=0.5"));
    const CodecChoice& large = top(dense_selection->codecs, 64 * kMiB);
    ASSERT_FALSE(large.dense()) << dense_selection->codecs.to_table();
    EXPECT_STREQ(large.algorithm->name, "sparse_reduce_scatter")
        << dense_selection->codecs.to_table();
  }
}

// The same link measured through three transports, the later ones `faster` times the first's
// bandwidth: a compressed op stays on the first (tcp) unless another is clearly faster.
PlanInputs three_transports(double faster) {
  PlanInputs in = link_inputs(0.125);
  TransportFigures first = in.profile.transports.front();
  in.profile.transports.clear();
  in.transports.clear();
  for (const char* name : {"tcp", "mpi", "ucx"}) {
    TransportFigures f = first;
    f.transport = name;
    if (std::string(name) != "tcp") f.bandwidth_GBps *= faster;
    in.profile.transports.push_back(f);
    TransportOffer offer;
    offer.name = name;
    offer.capabilities.host_memory = true;
    in.transports.push_back(offer);
  }
  return in;
}

TEST(CodecPlan, CompressedOpsStayOnTheFirstTransportUnlessAnotherIsClearlyFaster) {
  std::shared_ptr<const Codec> onebit = allow("onebit").front();
  const AlgorithmRow* sra = default_compressed_algorithm(*onebit);
  ASSERT_NE(sra, nullptr);
  // 10% and 25% more bandwidth measured on mpi and ucx: within the probe's noise (the same link
  // measured twice), tcp keeps it.
  EXPECT_EQ(compressed_transport(three_transports(1.10), onebit, sra, 64 * kMiB), 0);
  EXPECT_EQ(compressed_transport(three_transports(1.25), onebit, sra, 64 * kMiB), 0);
  // Also fp16, whose time follows the wire: priced alone, 25% more bandwidth would move it.
  std::shared_ptr<const Codec> fp16 = allow("fp16").front();
  EXPECT_EQ(compressed_transport(three_transports(1.25), fp16, default_compressed_algorithm(*fp16),
                                 64 * kMiB),
            0);
  // Ten times the bandwidth (another fabric): the faster transport, the first of the two in
  // table order.
  EXPECT_EQ(compressed_transport(three_transports(10.0), onebit, sra, 64 * kMiB), 1);
  // The auto plan ranks its codecs the same way: every one on tcp within the noise; on the
  // fast fabric the compressed pick for a large tensor moves to it.
  const auto near = build_ok(three_transports(1.10), allow(kThree));
  for (const CodecPlanEntry& e : near->codecs.entries()) {
    for (const CodecChoice& c : e.ranked) {
      if (!c.dense()) {
        EXPECT_EQ(c.transport, "tcp") << c.name();
      }
    }
  }
  PlanInputs fast_inputs = three_transports(10.0);
  for (CodecFigures& f : fast_inputs.profile.codecs) f.encode_GBps = f.decode_GBps = 50;
  const auto fast = build_ok(fast_inputs, allow("topk:ratio=0.01"));
  const CodecChoice& large = top(fast->codecs, 256 * kMiB);
  ASSERT_FALSE(large.dense()) << fast->codecs.to_table();
  EXPECT_EQ(large.transport, "mpi") << fast->codecs.to_table();
}

TEST(AllowList, CanonicalSortedWithoutDuplicatesOrDense) {
  const AllowList list = allow("topk:ratio=0.01,none,fp16,qsgd:bits=4,bucket=512,fp16");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(allow_list_text(list), "fp16,qsgd:bits=4,bucket=512,topk:ratio=0.01,mode=exact");
  EXPECT_TRUE(allow("").empty());
  EXPECT_TRUE(allow("none").empty());
}

TEST(AllowList, BadSpecsAndAutoAreConfigErrorsNamingTheSource) {
  AllowList list;
  Status st = parse_allow_list("fp16,qsgd:bits=99", "TIDEGATE_CODECS", &list);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("TIDEGATE_CODECS"), std::string::npos) << st.message();
  st = parse_allow_list("fp16,auto", "the allowed option", &list);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("'auto'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("the allowed option"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tidegate
