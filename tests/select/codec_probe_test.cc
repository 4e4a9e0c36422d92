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

// The slowest codec's time for one encode and decode of the quarter-size first pass, from its
// figures on the whole tensor (the first pass is a quarter of its 4 MiB).
double slowest_first_pass_ms(const std::vector<CodecFigures>& all) {
  double slowest_ms = 0;
  const double gb = 1.0 * (1 << 20) / 1e9;
  for (const CodecFigures& f : all) {
    slowest_ms = std::max(slowest_ms, 1000.0 * (gb / f.encode_GBps + gb / f.decode_GBps));
  }
  return slowest_ms;
}

// With a budget far shorter than the first pass, the codecs measured are a prefix of the
// registered order and the time spent is the budget plus about one codec.
TEST(CodecProbe, AShortBudgetMeasuresAPrefixAndStopsThere) {
  std::vector<CodecFigures> all;
  const double full_ms = timed_ms(60000, &all);
  const double budget_ms = full_ms / 60;
  std::vector<CodecFigures> some;
  const double spent_ms = timed_ms(budget_ms, &some);
  ASSERT_LT(some.size(), all.size()) << "a 60th of the whole measurement measured every codec";
  for (size_t i = 0; i < some.size(); ++i) EXPECT_EQ(some[i].codec, all[i].codec) << i;
  // Generous against timing noise: the bound that matters is "not the whole pass".
  EXPECT_LT(spent_ms, budget_ms + 4 * slowest_first_pass_ms(all) + 50) << "of " << full_ms;
}

// A budget too short for the whole tensor but ample for the quarter-size first pass (about a
// ninth of the whole measurement: a quarter pass and two whole ones) still gives every codec a
// figure, so a slow or loaded machine does not leave codecs to the nominal figures.
TEST(CodecProbe, AShortBudgetStillGivesEveryCodecAFigure) {
  std::vector<CodecFigures> all, none;
  const double full_ms = timed_ms(60000, &all);
  const double setup_ms = timed_ms(0, &none);  // the input's fill, also inside the budget
  // A quarter of the measurement is about half a whole-tensor pass but two first passes; a
  // machine busy with other tests can take the core away for longer than that margin, so the
  // best of five tries counts (without the first pass every try measures a prefix only).
  std::vector<CodecFigures> quick;
  for (int attempt = 0; attempt < 5 && quick.size() < all.size(); ++attempt) {
    timed_ms(setup_ms + (full_ms - setup_ms) * 0.25, &quick);
  }
  ASSERT_EQ(quick.size(), all.size());
  for (size_t i = 0; i < quick.size(); ++i) {
    EXPECT_EQ(quick[i].codec, all[i].codec);
    EXPECT_GT(quick[i].encode_GBps, 0) << quick[i].codec;
    EXPECT_GT(quick[i].decode_GBps, 0) << quick[i].codec;
  }
}

}  // namespace
}  // namespace tidegate
