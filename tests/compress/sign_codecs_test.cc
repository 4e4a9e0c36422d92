// signsgd (with summable vote payloads) and efsign against their references.
#include <gtest/gtest.h>

#include <cstring>

#include "compress/payload.h"
#include "quantiser_reference.h"

namespace tidegate {
namespace {

using namespace qtest;

TEST(SignSgd, PayloadIsOneBitPerElementAndDecodesToSigns) {
  auto codec = make("signsgd");
  for (int64_t n : {0, 1, 5, 8, 4095, 4096, 4097, 10001}) {
    std::vector<float> x = gradient(n, static_cast<uint64_t>(n));
    if (n > 3) x[3] = -0.0f;  // votes +1, like +0
    const auto payload = encode(*codec, view_of(x), 99);
    ASSERT_EQ(payload, ref_signsgd(x)) << n;
    const auto y = decode(*codec, payload, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] < 0 ? -1.0f : 1.0f);
  }
  EXPECT_TRUE(codec->deterministic());
  EXPECT_TRUE(codec->wants_error_feedback());
  EXPECT_TRUE(codec->payloads_summable());
}

TEST(SignSgd, SummedPayloadsCountVotesAndDecodeToTheMajority) {
  auto codec = make("signsgd");
  constexpr int64_t n = 5003;
  std::vector<std::vector<float>> workers;
  for (uint64_t w = 0; w < 5; ++w) workers.push_back(gradient(n, 100 + w));
  std::vector<uint8_t> sum = encode(*codec, view_of(workers[0]));
  std::vector<float> like(n);
  for (size_t w = 1; w < workers.size(); ++w) {
    const auto next = encode(*codec, view_of(workers[w]));
    std::vector<uint8_t> out(
        codec->max_summed_payload_bytes(view_of(like), static_cast<int64_t>(w + 1)));
    size_t written = 0;
    ASSERT_TRUE(codec
                    ->sum_payloads(sum.data(), sum.size(), next.data(), next.size(), view_of(like),
                                   out.data(), out.size(), &written)
                    .is_ok());
    ASSERT_EQ(written, out.size());
    sum.assign(out.begin(), out.begin() + static_cast<int64_t>(written));
    // After w + 1 voters: per element the count of negative votes, width bits_for(w + 1).
    const auto y = decode(*codec, sum, n);
    for (int64_t i = 0; i < n; ++i) {
      int negatives = 0;
      for (size_t k = 0; k <= w; ++k) negatives += workers[k][i] < 0;
      const int voters = static_cast<int>(w + 1);
      const float majority =
          2 * negatives > voters ? -1.0f : (2 * negatives < voters ? 1.0f : 0.0f);
      ASSERT_EQ(y[i], majority) << "voters " << voters << " element " << i;
    }
  }
  // Sums are associative in their counts: (a + b) + c == a + (b + c) byte for byte.
  const auto a = encode(*codec, view_of(workers[0])), b = encode(*codec, view_of(workers[1])),
             c = encode(*codec, view_of(workers[2]));
  auto add = [&](const std::vector<uint8_t>& p, const std::vector<uint8_t>& q, int64_t parties) {
    std::vector<uint8_t> out(codec->max_summed_payload_bytes(view_of(like), parties));
    size_t written = 0;
    EXPECT_TRUE(codec
                    ->sum_payloads(p.data(), p.size(), q.data(), q.size(), view_of(like),
                                   out.data(), out.size(), &written)
                    .is_ok());
    out.resize(written);
    return out;
  };
  EXPECT_EQ(add(add(a, b, 2), c, 3), add(a, add(b, c, 2), 3));
}

TEST(SignSgd, VotePayloadsAreValidated) {
  auto codec = make("signsgd");
  std::vector<float> like(16);
  const auto one = encode(*codec, view_of(like));
  std::vector<uint8_t> two(codec->max_summed_payload_bytes(view_of(like), 2));
  size_t written = 0;
  ASSERT_TRUE(codec
                  ->sum_payloads(one.data(), one.size(), one.data(), one.size(), view_of(like),
                                 two.data(), two.size(), &written)
                  .is_ok());
  // Width 2 for 2 voters, as two bit planes of 2 bytes after the 24-byte prefix; a count of 3
  // negative votes (both planes' bits set) is impossible.
  std::vector<uint8_t> bad = two;
  bad[24] = 0xff;  // plane 0, elements 0-7
  bad[26] = 0x01;  // plane 1, element 0: its count is 3
  std::vector<float> out(16, 5.0f);
  EXPECT_TRUE(
      is_error(codec->decode_add(bad.data(), bad.size(), view_of(out)), TIDEGATE_ERR_PROTOCOL));
  EXPECT_EQ(out, std::vector<float>(16, 5.0f)) << "a rejected payload must not be half added";
  bad = two;
  bad[20] = 3;  // width does not fit the voters
  EXPECT_TRUE(is_error(codec->decode(bad.data(), bad.size(), view_of(out)), TIDEGATE_ERR_PROTOCOL));
  // Too small an output buffer for the sum.
  EXPECT_TRUE(is_error(codec->sum_payloads(one.data(), one.size(), one.data(), one.size(),
                                           view_of(like), two.data(), two.size() - 1, &written),
                       TIDEGATE_ERR_INVALID_ARGUMENT));
  // Other codecs do not sum.
  EXPECT_TRUE(is_error(make("qsgd")->sum_payloads(one.data(), one.size(), one.data(), one.size(),
                                                  view_of(like), two.data(), two.size(), &written),
                       TIDEGATE_ERR_UNSUPPORTED));
}

// Sums of many voters (counts wider than a byte: width 9 for 300 voters), built as a tree the
// way owners combine them, decode to the majority of a plain count; a payload is 24 bytes of
// prefix plus `width` planes of ceil(n / 8) bytes.
TEST(SignSgd, SumsOfManyVotersDecodeToTheCountedMajority) {
  auto codec = make("signsgd");
  constexpr int64_t n = 777;  // not a multiple of 8 or 64: the planes' last words are partial
  std::vector<float> like(n);
  for (int voters : {2, 3, 4, 5, 8, 255, 256, 300}) {
    std::vector<std::vector<float>> workers;
    for (int w = 0; w < voters; ++w)
      workers.push_back(gradient(n, 1000 + static_cast<uint64_t>(w)));
    std::vector<std::pair<std::vector<uint8_t>, int64_t>> level;
    for (auto& x : workers) level.push_back({encode(*codec, view_of(x)), 1});
    while (level.size() > 1) {
      std::vector<std::pair<std::vector<uint8_t>, int64_t>> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) {
        const int64_t parties = level[i].second + level[i + 1].second;
        std::vector<uint8_t> out(codec->max_summed_payload_bytes(view_of(like), parties));
        size_t written = 0;
        ASSERT_TRUE(codec
                        ->sum_payloads(level[i].first.data(), level[i].first.size(),
                                       level[i + 1].first.data(), level[i + 1].first.size(),
                                       view_of(like), out.data(), out.size(), &written)
                        .is_ok());
        ASSERT_EQ(written, out.size());
        next.push_back({out, parties});
      }
      if (level.size() % 2 == 1) next.push_back(level.back());
      level = std::move(next);
    }
    const size_t width = tidegate::bits_for(static_cast<uint64_t>(voters));
    ASSERT_EQ(level[0].first.size(), 24 + width * ((n + 7) / 8)) << voters;
    std::vector<float> y(n, 0.5f);
    ASSERT_TRUE(
        codec->decode_add(level[0].first.data(), level[0].first.size(), view_of(y)).is_ok());
    for (int64_t i = 0; i < n; ++i) {
      int negatives = 0;
      for (const auto& x : workers) negatives += x[static_cast<size_t>(i)] < 0;
      const float majority =
          2 * negatives > voters ? -1.0f : (2 * negatives < voters ? 1.0f : 0.0f);
      ASSERT_EQ(y[static_cast<size_t>(i)], 0.5f + majority) << voters << " voters, element " << i;
    }
  }
}

// A count above the voters is named with its element and value; bits past the last element
// in a plane's last byte are not counts and are ignored.
TEST(SignSgd, ACountAboveTheVotersIsNamedAndPaddingBitsAreIgnored) {
  auto codec = make("signsgd");
  constexpr int64_t n = 70;  // planes of 9 bytes: bits 70-71 of the last byte are padding
  std::vector<float> like(n);
  const auto one = encode(*codec, view_of(like));  // every vote positive: all counts 0
  std::vector<uint8_t> five(codec->max_summed_payload_bytes(view_of(like), 5));
  std::vector<uint8_t> two(codec->max_summed_payload_bytes(view_of(like), 2)), four = five;
  size_t written = 0;
  ASSERT_TRUE(codec
                  ->sum_payloads(one.data(), one.size(), one.data(), one.size(), view_of(like),
                                 two.data(), two.size(), &written)
                  .is_ok());
  ASSERT_TRUE(codec
                  ->sum_payloads(two.data(), two.size(), two.data(), two.size(), view_of(like),
                                 four.data(), four.size(), &written)
                  .is_ok());
  ASSERT_EQ(written, 24u + 3 * 9);  // 4 voters: width 3
  std::vector<uint8_t> padded = four;
  for (int plane = 0; plane < 3; ++plane) padded[24 + 9 * plane + 8] |= 0xc0;  // counts 7 there
  std::vector<float> out(n, 2.0f);
  ASSERT_TRUE(codec->decode(padded.data(), padded.size(), view_of(out)).is_ok());
  EXPECT_EQ(out, std::vector<float>(n, 1.0f));
  std::vector<uint8_t> bad = four;
  bad[24 + 9 * 0 + 8] |= 0x01;  // element 64: plane 0 ...
  bad[24 + 9 * 2 + 8] |= 0x01;  // ... and plane 2: count 5 of 4 voters
  const Status st = codec->decode(bad.data(), bad.size(), view_of(out));
  ASSERT_TRUE(is_error(st, TIDEGATE_ERR_PROTOCOL));
  EXPECT_NE(st.message().find("counts 5 negative votes of 4 voters at element 64"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(is_error(codec->sum_payloads(bad.data(), bad.size(), one.data(), one.size(),
                                           view_of(like), five.data(), five.size(), &written),
                       TIDEGATE_ERR_PROTOCOL));
}

// What an owner gathers: the sum condensed to its decision decodes to the same bits as the
// sum, in 1 (odd voters) or 2 (even voters) planes, and is not summed again.
TEST(SignSgd, ACondensedSumDecodesLikeTheSumInOneOrTwoPlanes) {
  auto codec = make("signsgd");
  constexpr int64_t n = 777;
  std::vector<float> like(n);
  std::vector<uint8_t> sum = encode(*codec, view_of(like));
  for (int voters = 1; voters <= 9; ++voters) {
    if (voters > 1) {
      std::vector<float> x = gradient(n, 500 + static_cast<uint64_t>(voters));
      const auto next = encode(*codec, view_of(x));
      std::vector<uint8_t> out(codec->max_summed_payload_bytes(view_of(like), voters));
      size_t written = 0;
      ASSERT_TRUE(codec
                      ->sum_payloads(sum.data(), sum.size(), next.data(), next.size(),
                                     view_of(like), out.data(), out.size(), &written)
                      .is_ok());
      sum = out;
    }
    const size_t bound = codec->max_condensed_payload_bytes(view_of(like), voters);
    const size_t planes = voters == 1 ? 1 : (voters % 2 == 0 ? 2 : 1);
    ASSERT_EQ(bound, 24 + planes * ((n + 7) / 8)) << voters;
    std::vector<uint8_t> condensed(bound);
    size_t written = 0;
    ASSERT_TRUE(codec
                    ->condense_sum(sum.data(), sum.size(), view_of(like), condensed.data(),
                                   condensed.size(), &written)
                    .is_ok());
    ASSERT_EQ(written, bound);
    if (voters == 1) {
      EXPECT_EQ(condensed, sum) << "one vote is its own decision";
    }
    for (bool add : {false, true}) {
      std::vector<float> from_sum(n, 0.25f), from_condensed(n, 0.25f);
      auto run = [&](const std::vector<uint8_t>& p, std::vector<float>& o) {
        return add ? codec->decode_add(p.data(), p.size(), view_of(o))
                   : codec->decode(p.data(), p.size(), view_of(o));
      };
      ASSERT_TRUE(run(sum, from_sum).is_ok());
      ASSERT_TRUE(run(condensed, from_condensed).is_ok());
      ASSERT_EQ(0, std::memcmp(from_sum.data(), from_condensed.data(), n * sizeof(float)))
          << voters << " voters, add " << add;
    }
    if (voters >= 2) {
      std::vector<uint8_t> out(codec->max_summed_payload_bytes(view_of(like), voters + 1));
      EXPECT_TRUE(
          is_error(codec->sum_payloads(condensed.data(), condensed.size(), sum.data(), sum.size(),
                                       view_of(like), out.data(), out.size(), &written),
                   TIDEGATE_ERR_PROTOCOL))
          << "a decision is not a count";
    }
    if (voters == 4) {  // negative and tied at once cannot come from a condensed sum
      std::vector<uint8_t> bad = condensed;
      bad[24 + 3] |= 0x20;                // element 29 negative ...
      bad[24 + (n + 7) / 8 + 3] |= 0x20;  // ... and tied
      std::vector<float> o(n, 7.0f);
      const Status st = codec->decode_add(bad.data(), bad.size(), view_of(o));
      ASSERT_TRUE(is_error(st, TIDEGATE_ERR_PROTOCOL));
      EXPECT_NE(st.message().find("both negative and tied at element 29"), std::string::npos)
          << st.message();
      EXPECT_EQ(o, std::vector<float>(n, 7.0f));
    }
  }
  // Width 0 (a decision) needs at least two voters.
  std::vector<uint8_t> one = encode(*codec, view_of(like));
  one[20] = 0;
  std::vector<float> o(n);
  EXPECT_TRUE(is_error(codec->decode(one.data(), one.size(), view_of(o)), TIDEGATE_ERR_PROTOCOL));
}

TEST(EfSign, PayloadIsScaleAndSignBits) {
  auto codec = make("efsign");
  for (int64_t n : {0, 1, 9, 4096, 4097, 20000}) {
    std::vector<float> x = gradient(n, static_cast<uint64_t>(n) + 1);
    const auto payload = encode(*codec, view_of(x), 5);
    ASSERT_EQ(payload, ref_efsign(x)) << n;
    float scale = 0;
    std::memcpy(&scale, payload.data() + 16, 4);
    const auto y = decode(*codec, payload, n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] < 0 ? -scale : scale);
  }
  EXPECT_TRUE(codec->deterministic());
  EXPECT_TRUE(codec->wants_error_feedback());
}

TEST(EfSign, ScaleDoesNotDependOnThreads) {
  auto codec = make("efsign");
  std::vector<float> x = gradient(3'000'000, 17, 3.0f);
  const auto one = encode(*codec, view_of(x), 0, 1);
  EXPECT_EQ(one, encode(*codec, view_of(x), 0, 2));
  EXPECT_EQ(one, encode(*codec, view_of(x), 0, 5));
  EXPECT_EQ(one, ref_efsign(x));
}

}  // namespace
}  // namespace tidegate
