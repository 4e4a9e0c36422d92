// The codec part of the probe keeps to its budget: a codec is never started once the budget is
// spent, so a slow machine (or a sanitizer build) gets fewer measured codecs, not a longer probe.
#include "select/codec_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <set>
#include <string>

#include "compress/codec.h"

namespace tidegate {
namespace {

double timed_ms(double budget_ms, std::vector<CodecFigures>* figures) {
  const auto start = std::chrono::steady_clock::now();
  *figures = measure_codecs(budget_ms);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

TEST(CodecProbe, AnAmpleBudgetMeasuresEveryCodecOnce) {
  std::vector<CodecFigures> figures;
  timed_ms(60000, &figures);
  const std::vector<std::string> codecs = registered_codecs();
  ASSERT_EQ(figures.size(), codecs.size());
  std::set<std::string> seen;
  for (const CodecFigures& f : figures) {
    EXPECT_TRUE(seen.insert(f.codec).second) << f.codec << " twice";
    EXPECT_TRUE(std::isfinite(f.encode_GBps) && f.encode_GBps > 0) << f.codec;
    EXPECT_TRUE(std::isfinite(f.decode_GBps) && f.decode_GBps > 0) << f.codec;
  }
  for (const std::string& c : codecs) EXPECT_EQ(seen.count(c), 1u) << c;
}

TEST(CodecProbe, ASpentBudgetStartsNoCodec) {
  std::vector<CodecFigures> figures;
  timed_ms(0, &figures);
  EXPECT_TRUE(figures.empty()) << figures.size() << " codecs measured with no budget";
}

// With a budget shorter than one pass, the codecs measured are a prefix of the registered order
// and the time spent is the budget plus at most the slowest single codec (which ran already once
// in the ample pass, so its time is known here).
TEST(CodecProbe, AShortBudgetMeasuresAPrefixAndStopsThere) {
  std::vector<CodecFigures> all;
  const double full_ms = timed_ms(60000, &all);
  double slowest_ms = 0;
  for (const CodecFigures& f : all) {
    const double gb = 4.0 * (1 << 20) / 1e9;
    slowest_ms = std::max(slowest_ms, 1000.0 * (gb / f.encode_GBps + gb / f.decode_GBps));
  }
  const double budget_ms = full_ms / 8;
  std::vector<CodecFigures> some;
  const double spent_ms = timed_ms(budget_ms, &some);
  ASSERT_LT(some.size(), all.size()) << "a budget of an eighth of two passes measured every codec";
  for (size_t i = 0; i < some.size(); ++i) EXPECT_EQ(some[i].codec, all[i].codec) << i;
  // Generous against timing noise: the bound that matters is "not the whole pass".
  EXPECT_LT(spent_ms, budget_ms + 3 * slowest_ms + 50) << "of " << full_ms << " ms for all";
}

}  // namespace
}  // namespace tidegate
