// PowerSGD: exact recovery of low-rank matrices, orthogonality, warm start, state checkpoints,
// the codec wrapper's payloads and shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <limits>

#include "compress/powersgd.h"
#include "compress/powersgd_math.h"
#include "sparsifier_test_util.h"

namespace tidegate {
namespace {

using namespace sparsifier_test;

// A rows x cols matrix of exact rank r (sum of r outer products), row-major.
std::vector<float> low_rank(int64_t rows, int64_t cols, int r, uint32_t seed) {
  const std::vector<float> u = normal_floats(static_cast<size_t>(rows * r), seed);
  const std::vector<float> v = normal_floats(static_cast<size_t>(cols * r), seed + 1000);
  std::vector<float> m(static_cast<size_t>(rows * cols), 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      for (int c = 0; c < r; ++c) m[i * cols + j] += u[i * r + c] * v[j * r + c];
    }
  }
  return m;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

TEST(PowerSgd, RecoversALowRankMatrixInOneStep) {
  for (int r : {1, 2, 4}) {
    std::vector<float> m = low_rank(96, 80, r, 1);
    auto codec = codec_from("powersgd:rank=" + std::to_string(r));
    const auto payload = encode_ok(*codec, matrix_view(m, 96, 80), 5);
    EXPECT_LT(payload.size(), m.size() * sizeof(float));
    const std::vector<float> y = decode_ok(*codec, payload, 96 * 80, 96, 80);
    EXPECT_LT(relative_error(m, y), 1e-5) << "rank " << r;
  }
}

TEST(PowerSgd, RankAboveTheMatrixRankZeroesTheExtraColumnsDeterministically) {
  std::vector<float> m = low_rank(64, 50, 2, 2);
  PowerSgdState state;
  std::vector<float> p;
  ASSERT_TRUE(powersgd_local_step(m.data(), 64, 50, 4, 7, &state, &p).is_ok());
  std::vector<float> y(m.size());
  powersgd_reconstruct(p.data(), state.q(), 64, 50, 4, y.data(), false);
  EXPECT_LT(relative_error(m, y), 1e-5);
  // Columns 3 and 4 of P are rounding noise after removing the first two: exactly zero.
  for (int c = 2; c < 4; ++c) {
    for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(p[c * 64 + i], 0.0f);
  }
}

// The collective reconstructs block by block of rows (to take each block's residual while it
// is in cache): every block split gives the whole reconstruction's bits.
TEST(PowerSgd, ReconstructingRowBlocksGivesTheWholeReconstructionsBits) {
  const int64_t rows = 37, cols = 2500;  // cols spans more than one column block
  for (int rank : {0, 1, 3}) {
    const std::vector<float> p = normal_floats(static_cast<size_t>(rows * rank), 11);
    const std::vector<float> q = normal_floats(static_cast<size_t>(cols * rank), 12);
    std::vector<float> whole(static_cast<size_t>(rows * cols), 9.0f);
    powersgd_reconstruct(p.data(), q.data(), rows, cols, rank, whole.data(), false);
    for (int64_t block : {1, 5, 37}) {
      std::vector<float> blocks(whole.size(), -9.0f);
      for (int64_t first = 0; first < rows; first += block) {
        powersgd_reconstruct_rows(p.data(), q.data(), rows, cols, rank, first,
                                  std::min(block, rows - first), blocks.data());
      }
      ASSERT_EQ(0, std::memcmp(whole.data(), blocks.data(), whole.size() * sizeof(float)))
          << "rank " << rank << ", blocks of " << block;
    }
  }
}

TEST(PowerSgd, OrthogonalizeGivesOrthonormalColumns) {
  const int64_t rows = 1000;
  const int rank = 6;
  std::vector<float> p = normal_floats(static_cast<size_t>(rows * rank), 3);
  // Column 2 nearly parallel to column 0 (a 1e-3 part of its own: kept), column 3 parallel up
  // to rounding noise (zeroed), column 5 zero (zeroed).
  for (int64_t i = 0; i < rows; ++i) p[2 * rows + i] = p[i] * 2.0f + 1e-3f * p[2 * rows + i];
  for (int64_t i = 0; i < rows; ++i) p[3 * rows + i] = p[i] * 2.0f + 1e-7f * p[3 * rows + i];
  for (int64_t i = 0; i < rows; ++i) p[5 * rows + i] = 0.0f;
  EXPECT_EQ(powersgd_orthogonalize(p.data(), rows, rank), 2);
  for (int a = 0; a < rank; ++a) {
    for (int b = 0; b < rank; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i)
        dot += static_cast<double>(p[a * rows + i]) * p[b * rows + i];
      const double expect = (a == b && a != 3 && a != 5) ? 1.0 : 0.0;
      EXPECT_NEAR(dot, expect, 1e-6) << a << "," << b;
    }
  }
}

TEST(PowerSgd, WarmStartImprovesTheApproximationOverSteps) {
  // A full-rank matrix with a decaying spectrum: power iteration converges to the top
  // subspace, so the error of a fixed matrix falls from step to step toward the optimum.
  const int64_t rows = 120, cols = 100;
  std::vector<float> m = low_rank(rows, cols, 2, 4);
  const std::vector<float> tail = low_rank(rows, cols, 30, 5);
  for (size_t i = 0; i < m.size(); ++i) m[i] += 0.2f * tail[i];
  auto codec = codec_from("powersgd:rank=2");
  const auto& power = static_cast<const PowerSgdCodec&>(*codec);
  PowerSgdState state;
  std::vector<double> errors;
  for (int step = 0; step < 6; ++step) {
    std::vector<uint8_t> out(codec->max_payload_bytes(matrix_view(m, rows, cols)));
    size_t written = 0;
    EncodeContext context;
    context.seed = 11;
    ASSERT_TRUE(power
                    .encode_with_state(matrix_view(m, rows, cols), context, &state, out.data(),
                                       out.size(), &written)
                    .is_ok());
    out.resize(written);
    errors.push_back(relative_error(m, decode_ok(*codec, out, rows * cols, rows, cols)));
  }
  EXPECT_LT(errors.back(), errors.front() * 0.9);
  for (size_t s = 1; s < errors.size(); ++s)
    EXPECT_LE(errors[s], errors[s - 1] * (1 + 1e-4)) << "step " << s;
  // The stateless encode() is the first step every time.
  const auto fresh = encode_ok(*codec, matrix_view(m, rows, cols), 11);
  EXPECT_NEAR(relative_error(m, decode_ok(*codec, fresh, rows * cols, rows, cols)), errors.front(),
              1e-9);
}

TEST(PowerSgd, StateSaveLoadRoundTripAndRefusesGarbage) {
  std::vector<float> m = low_rank(40, 30, 3, 6);
  PowerSgdState state;
  std::vector<float> p;
  ASSERT_TRUE(powersgd_local_step(m.data(), 40, 30, 3, 1, &state, &p).is_ok());
  const std::vector<uint8_t> bytes = state.save();
  PowerSgdState loaded;
  ASSERT_TRUE(loaded.load(bytes.data(), bytes.size()).is_ok());
  EXPECT_EQ(loaded.cols(), 30);
  EXPECT_EQ(loaded.rank(), 3);
  EXPECT_EQ(std::vector<float>(loaded.q(), loaded.q() + 90),
            std::vector<float>(state.q(), state.q() + 90));
  EXPECT_EQ(loaded.save(), bytes);
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_EQ(loaded.load(bytes.data(), len).code(), TIDEGATE_ERR_INVALID_ARGUMENT) << len;
  }
  auto bad = bytes;
  bad[0] ^= 1;
  EXPECT_FALSE(loaded.load(bad.data(), bad.size()).is_ok());
  bad = bytes;
  bad[12] = 0xff;  // cols
  EXPECT_FALSE(loaded.load(bad.data(), bad.size()).is_ok());
  EXPECT_EQ(loaded.save(), bytes);  // failed loads left the state alone
  PowerSgdState empty;
  const auto none = empty.save();
  ASSERT_TRUE(loaded.load(none.data(), none.size()).is_ok());
  EXPECT_TRUE(loaded.empty());
}

TEST(PowerSgd, ZeroMatrixAndRedrawOfDeadColumns) {
  std::vector<float> zeros(50 * 40, 0.0f);
  PowerSgdState state;
  std::vector<float> p;
  ASSERT_TRUE(powersgd_local_step(zeros.data(), 50, 40, 2, 3, &state, &p).is_ok());
  for (float v : p) ASSERT_EQ(v, 0.0f);
  // Q collapsed to zero; the next step redraws it from that step's seed and recovers.
  std::vector<float> m = low_rank(50, 40, 2, 8);
  ASSERT_TRUE(powersgd_local_step(m.data(), 50, 40, 2, 4, &state, &p).is_ok());
  std::vector<float> y(m.size());
  powersgd_reconstruct(p.data(), state.q(), 50, 40, 2, y.data(), false);
  EXPECT_LT(relative_error(m, y), 1e-5);
}

TEST(PowerSgd, ShapeRulesAndDenseFallback) {
  std::vector<float> m = normal_floats(64, 9);
  auto codec = codec_from("powersgd:rank=4");
  std::vector<uint8_t> out(4096);
  size_t written = 0;
  // No shape, or a shape that does not match count.
  EXPECT_EQ(codec->encode(view_of(m), EncodeContext(), out.data(), out.size(), &written).code(),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(
      codec->encode(matrix_view(m, 8, 9), EncodeContext(), out.data(), out.size(), &written).code(),
      TIDEGATE_ERR_INVALID_ARGUMENT);
  // 8 x 8 at rank 4: 4 * 16 floats are not smaller than 64, so the matrix goes dense (exact).
  const auto dense = encode_ok(*codec, matrix_view(m, 8, 8));
  EXPECT_EQ(decode_ok(*codec, dense, 64, 8, 8), m);
  EXPECT_EQ(decode_ok(*codec, dense, 64), m);  // a 1-D output of the same count is fine
  // A 1 x n matrix has rank at most 1: the effective rank, and it goes dense as well.
  std::vector<float> row = normal_floats(100, 10);
  EXPECT_EQ(decode_ok(*codec, encode_ok(*codec, matrix_view(row, 1, 100)), 100, 1, 100), row);
  std::vector<float> empty;
  EXPECT_TRUE(decode_ok(*codec, encode_ok(*codec, view_of(empty)), 0).empty());
  EXPECT_EQ(codec->spec(), "powersgd:rank=4");
  std::unique_ptr<Codec> bad;
  EXPECT_EQ(make_codec("powersgd:rank=0", &bad).code(), TIDEGATE_ERR_CONFIG);
  EXPECT_EQ(make_codec("powersgd:rank=65", &bad).code(), TIDEGATE_ERR_CONFIG);
}

TEST(PowerSgd, NonFiniteInputIsRefusedNamingTheElement) {
  std::vector<float> m = low_rank(30, 20, 2, 11);
  m[437] = std::numeric_limits<float>::quiet_NaN();
  m[500] = std::numeric_limits<float>::infinity();
  auto codec = codec_from("powersgd:rank=2");
  std::vector<uint8_t> out(codec->max_payload_bytes(matrix_view(m, 30, 20)));
  size_t written = 0;
  const Status st =
      codec->encode(matrix_view(m, 30, 20), EncodeContext(), out.data(), out.size(), &written);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("437"), std::string::npos) << st.message();
}

TEST(PowerSgd, MalformedPayloadsAreRejected) {
  std::vector<float> m = low_rank(30, 20, 2, 12);
  auto codec = codec_from("powersgd:rank=2");
  const auto payload = encode_ok(*codec, matrix_view(m, 30, 20));
  expect_truncations_rejected(*codec, payload, 600, 30, 20);
  std::vector<float> out(600);
  auto rejects = [&](std::vector<uint8_t> bad, int64_t rows, int64_t cols, const char* what) {
    EXPECT_EQ(codec->decode(bad.data(), bad.size(), matrix_view(out, rows, cols)).code(),
              TIDEGATE_ERR_PROTOCOL)
        << what;
  };
  rejects(payload, 20, 30, "transposed output shape");
  auto bad = payload;
  const int64_t huge = int64_t{1} << 62;
  std::memcpy(bad.data() + 16, &huge, 8);
  rejects(bad, 30, 20, "rows huge");
  bad = payload;
  bad[32] = 0;
  rejects(bad, 30, 20, "rank 0 without the dense flag");
  bad = payload;
  bad[32] = 200;
  rejects(bad, 30, 20, "rank huge");
  bad = payload;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data() + kPowerSgdPrefixBytes, &nan, 4);
  rejects(bad, 30, 20, "NaN factor");
  bad = payload;
  bad.push_back(0);
  rejects(bad, 30, 20, "trailing byte");
}

}  // namespace
}  // namespace tidegate
