// ProbeProfile: the text form round-trips exactly (every rank and the cache must hold the same
// bits), the parser refuses anything to_text() would not write, and defaults/JSON are sane.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "select/probe_profile.h"

namespace tidegate {
namespace {

ProbeProfile awkward_profile() {
  ProbeProfile p;
  p.size = 7;
  p.source = "cache:/tmp/some dir/probe cache.txt";
  p.probe_ms = 1.0 / 3.0;
  p.reduce_GBps = 0.1 + 0.2;  // not 0.3: the last bit must survive
  TransportFigures tcp;
  tcp.transport = "tcp";
  tcp.alpha_us = 5e-324;  // smallest denormal
  tcp.bandwidth_GBps = 123456.789e10;
  TransportFigures mpi;
  mpi.transport = "mpi";
  mpi.alpha_us = 17.25;
  mpi.bandwidth_GBps = std::nextafter(1.25, 2.0);
  mpi.native_alpha_us = 31.000000000000004;
  mpi.native_bandwidth_GBps = std::numeric_limits<double>::max();
  mpi.native_max_bytes = 3145728;
  p.transports = {tcp, mpi};
  return p;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(ProbeProfile, TextRoundTripsExactly) {
  const ProbeProfile original = awkward_profile();
  ProbeProfile parsed;
  ASSERT_TRUE(ProbeProfile::parse(original.to_text(), &parsed).is_ok());
  EXPECT_EQ(parsed.to_text(), original.to_text());
  EXPECT_EQ(parsed.size, 7);
  EXPECT_EQ(parsed.source, original.source);
  EXPECT_TRUE(same_bits(parsed.probe_ms, original.probe_ms));
  EXPECT_TRUE(same_bits(parsed.reduce_GBps, original.reduce_GBps));
  ASSERT_EQ(parsed.transports.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TransportFigures& a = parsed.transports[i];
    const TransportFigures& b = original.transports[i];
    EXPECT_EQ(a.transport, b.transport);
    EXPECT_TRUE(same_bits(a.alpha_us, b.alpha_us)) << a.transport;
    EXPECT_TRUE(same_bits(a.bandwidth_GBps, b.bandwidth_GBps)) << a.transport;
    EXPECT_TRUE(same_bits(a.native_alpha_us, b.native_alpha_us)) << a.transport;
    EXPECT_TRUE(same_bits(a.native_bandwidth_GBps, b.native_bandwidth_GBps)) << a.transport;
    EXPECT_TRUE(same_bits(a.native_max_bytes, b.native_max_bytes)) << a.transport;
  }
  EXPECT_NE(parsed.find("mpi"), nullptr);
  EXPECT_EQ(parsed.find("ucx"), nullptr);
}

TEST(ProbeProfile, ParseRejectsGarbage) {
  const std::string good = awkward_profile().to_text();
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"no final newline", good.substr(0, good.size() - 1)},
      {"trailing text", good + "extra 1\n"},
      {"truncated", good.substr(0, good.find("transport mpi"))},
      {"size zero", replaced("size 7\n", "size 0\n")},
      {"size not a number", replaced("size 7\n", "size seven\n")},
      {"negative figure", replaced("alpha_us 17.25", "alpha_us -17.25")},
      {"nan figure", replaced("alpha_us 17.25", "alpha_us nan")},
      {"inf figure", replaced("alpha_us 17.25", "alpha_us inf")},
      {"junk after number", replaced("alpha_us 17.25", "alpha_us 17.25x")},
      {"space before number", replaced("alpha_us 17.25", "alpha_us  17.25")},
      {"keys swapped", replaced("probe_ms", "reduce_GBps")},
      {"unknown key", replaced("native_alpha_us 31", "native_beta_us 31")},
      {"duplicate transport", replaced("transport mpi\n", "transport tcp\n")},
      {"bad transport name", replaced("transport mpi\n", "transport M P I\n")},
      {"more transports announced", replaced("transports 2\n", "transports 3\n")},
      {"fewer transports announced", replaced("transports 2\n", "transports 1\n")},
      {"huge transport count", replaced("transports 2\n", "transports 1000000\n")},
      {"empty source", replaced("source cache:/tmp/some dir/probe cache.txt\n", "source \n")},
      {"windows line ends", replaced("size 7\n", "size 7\r\n")},
  };
  for (const auto& [name, text] : cases) {
    ProbeProfile out;
    out.size = 99;
    Status st = ProbeProfile::parse(text, &out);
    EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG) << name << ": " << st.to_string();
    EXPECT_NE(st.message().find("line"), std::string::npos) << name << ": " << st.message();
    EXPECT_EQ(out.size, 99) << name << ": a failed parse must leave *out alone";
  }
}

TEST(ProbeProfile, DefaultsAreSaneAndRoundTrip) {
  const ProbeProfile d = ProbeProfile::defaults(4, {"tcp", "ucx"});
  EXPECT_EQ(d.size, 4);
  EXPECT_EQ(d.source, "defaults");
  EXPECT_EQ(d.probe_ms, 0);
  EXPECT_GT(d.reduce_GBps, 0);
  ASSERT_EQ(d.transports.size(), 2u);
  EXPECT_EQ(d.transports[1].transport, "ucx");
  for (const TransportFigures& t : d.transports) {
    EXPECT_GT(t.alpha_us, 0);
    EXPECT_GT(t.bandwidth_GBps, 0);
    EXPECT_EQ(t.native_bandwidth_GBps, 0);
  }
  ProbeProfile parsed;
  ASSERT_TRUE(ProbeProfile::parse(d.to_text(), &parsed).is_ok());
  EXPECT_EQ(parsed.to_text(), d.to_text());
  // No transports at all is still a valid (if useless) profile.
  const ProbeProfile none = ProbeProfile::defaults(1, {});
  ASSERT_TRUE(ProbeProfile::parse(none.to_text(), &parsed).is_ok());
  EXPECT_TRUE(parsed.transports.empty());
}

TEST(ProbeProfile, JsonHasTheDocumentedShape) {
  ProbeProfile p = ProbeProfile::defaults(4, {"tcp"});
  p.source = "cache:/tmp/a\"b\\c";
  p.reduce_GBps = 2.5;
  const std::string json = p.to_json();
  EXPECT_EQ(json.rfind("{\"size\":4,\"source\":\"cache:/tmp/a\\\"b\\\\c\",\"probe_ms\":0,", 0), 0u)
      << json;
  EXPECT_NE(json.find("\"reduce_GBps\":2.5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"probe\":{\"tcp\":{\"alpha_us\":20,\"bandwidth_GBps\":1.25"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"native_max_bytes\":0}},\"codecs\":{"), std::string::npos) << json;
  EXPECT_EQ(json.back(), '}') << json;
}

}  // namespace
}  // namespace tidegate
