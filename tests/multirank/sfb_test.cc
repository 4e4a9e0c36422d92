// tidegate_sfb_allreduce through the whole stack (ranks as threads over loopback TCP): both
// methods deliver the summed product of every rank's factors (against a float64 reference),
// bitwise identical on every rank, also when ranks' batches differ; AUTO picks alike on every
// rank; ranks whose layers differ get MISMATCH on every rank; bad shapes are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "thread_world.h"
#include "tidegate/tidegate.h"

namespace tidegate::testing {
namespace {

std::vector<float> values(int64_t count, int seed) {
  std::vector<float> x(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) x[i] = std::cos(0.11f * static_cast<float>(i + 7 * seed));
  return x;
}

tidegate_tensor_t matrix(std::vector<float>& x, int64_t rows, int64_t cols) {
  tidegate_tensor_t t = tidegate_host_tensor(x.data(), rows * cols, TIDEGATE_FLOAT32);
  t.rows = rows;
  t.cols = cols;
  return t;
}

struct SfbRun {
  tidegate_status_t status = TIDEGATE_OK;
  std::string choice, error;
  std::vector<float> out;
};

std::vector<SfbRun> run_sfb(ThreadWorld& world, const std::vector<int64_t>& ks,
                         const std::vector<int64_t>& ms, int64_t n, tidegate_reduce_op_t op,
                         tidegate_sfb_method_t method) {
  std::vector<SfbRun> runs(world.size());
  world.run([&](int rank, tidegate_comm_t comm) {
    const int64_t k = ks[rank], m = ms[rank];
    std::vector<float> u = values(k * m, rank), v = values(k * n, rank + 50);
    SfbRun& run = runs[rank];
    run.out.assign(static_cast<size_t>(m * n), -1.0f);
    tidegate_tensor_t tu = matrix(u, k, m), tv = matrix(v, k, n), to = matrix(run.out, m, n);
    char choice[8] = "";
    run.status = tidegate_sfb_allreduce(comm, &tu, &tv, &to, op, method, choice, sizeof choice);
    run.choice = choice;
    if (run.status != TIDEGATE_OK) run.error = tidegate_last_error();
  });
  return runs;
}

TEST(Sfb, BothMethodsGiveTheSumOfProductsIdenticalOnEveryRank) {
  ThreadWorld& world = ThreadWorld::shared(3);
  const std::vector<int64_t> ks = {4, 0, 7};  // batches differ; one rank has none
  const int64_t m = 33, n = 1029;
  for (tidegate_sfb_method_t method : {TIDEGATE_SFB_FACTORS, TIDEGATE_SFB_DENSE}) {
    for (tidegate_reduce_op_t op : {TIDEGATE_SUM, TIDEGATE_AVG}) {
      SCOPED_TRACE(std::to_string(method) + " op " + std::to_string(op));
      const std::vector<SfbRun> runs = run_sfb(world, ks, {m, m, m}, n, op, method);
      for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(runs[r].status, TIDEGATE_OK) << runs[r].error;
        EXPECT_EQ(runs[r].choice, method == TIDEGATE_SFB_FACTORS ? "sfb" : "dense");
        ASSERT_EQ(std::memcmp(runs[r].out.data(), runs[0].out.data(), m * n * sizeof(float)), 0)
            << "rank " << r;
      }
      std::vector<std::vector<float>> us, vs;
      for (int r = 0; r < 3; ++r) {
        us.push_back(values(ks[r] * m, r));
        vs.push_back(values(ks[r] * n, r + 50));
      }
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double exact = 0;
          for (int r = 0; r < 3; ++r) {
            const std::vector<float>& u = us[r];
            const std::vector<float>& v = vs[r];
            for (int64_t b = 0; b < ks[r]; ++b) {
              exact += static_cast<double>(u[b * m + i]) * v[b * n + j];
            }
          }
          if (op == TIDEGATE_AVG) exact /= 3;
          ASSERT_NEAR(runs[0].out[i * n + j], exact, 2e-5) << i << "," << j;
        }
      }
    }
  }
}

TEST(Sfb, AutoPicksAlikeOnEveryRank) {
  ThreadWorld& world = ThreadWorld::shared(3);
  for (int64_t k : {int64_t{1}, int64_t{512}}) {
    const std::vector<SfbRun> runs = run_sfb(world, {k, k, k}, {256, 256, 256}, 256, TIDEGATE_SUM,
                                          TIDEGATE_SFB_AUTO);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(runs[r].status, TIDEGATE_OK) << runs[r].error;
      EXPECT_EQ(runs[r].choice, runs[0].choice);
      EXPECT_TRUE(runs[r].choice == "sfb" || runs[r].choice == "dense") << runs[r].choice;
      ASSERT_EQ(std::memcmp(runs[r].out.data(), runs[0].out.data(), 256 * 256 * sizeof(float)), 0);
    }
    // A batch of 512 rows on each of 3 ranks sends 3 x 512 x 512 floats as factors against a
    // 256 x 256 matrix, and multiplies 3 times as much: the rule must not pick SFB.
    if (k == 512) {
      EXPECT_EQ(runs[0].choice, "dense");
    }
  }
}

TEST(Sfb, RanksWhoseLayersDifferGetMismatchOnEveryRank) {
  ThreadWorld& world = ThreadWorld::shared(3);
  const std::vector<SfbRun> runs =
      run_sfb(world, {2, 2, 2}, {16, 17, 16}, 8, TIDEGATE_SUM, TIDEGATE_SFB_FACTORS);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(runs[r].status, TIDEGATE_ERR_MISMATCH) << runs[r].error;
    EXPECT_NE(runs[r].error.find("rank 1"), std::string::npos) << runs[r].error;
  }
  // The communicator goes on.
  const std::vector<SfbRun> again =
      run_sfb(world, {2, 2, 2}, {16, 16, 16}, 8, TIDEGATE_SUM, TIDEGATE_SFB_FACTORS);
  for (const SfbRun& run : again) EXPECT_EQ(run.status, TIDEGATE_OK) << run.error;
}

TEST(Sfb, BadShapesAreRefusedAtTheCall) {
  ThreadWorld& world = ThreadWorld::shared(3);
  tidegate_comm_t comm = world.comm(0);
  std::vector<float> u(6), v(8), out(12), small(11);
  tidegate_tensor_t tu = matrix(u, 2, 3), tv = matrix(v, 2, 4), to = matrix(out, 3, 4);
  tidegate_tensor_t flat_u = tidegate_host_tensor(u.data(), 6, TIDEGATE_FLOAT32);
  EXPECT_EQ(tidegate_sfb_allreduce(comm, &flat_u, &tv, &to, TIDEGATE_SUM, TIDEGATE_SFB_AUTO,
                                   nullptr, 0),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  tidegate_tensor_t wrong_k = matrix(v, 4, 2);
  EXPECT_EQ(tidegate_sfb_allreduce(comm, &tu, &wrong_k, &to, TIDEGATE_SUM, TIDEGATE_SFB_AUTO,
                                   nullptr, 0),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tidegate_last_error()).find("K"), std::string::npos);
  tidegate_tensor_t short_out = tidegate_host_tensor(small.data(), 11, TIDEGATE_FLOAT32);
  EXPECT_EQ(tidegate_sfb_allreduce(comm, &tu, &tv, &short_out, TIDEGATE_SUM, TIDEGATE_SFB_AUTO,
                                   nullptr, 0),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tidegate_sfb_allreduce(comm, &tu, &tv, &to, TIDEGATE_MAX, TIDEGATE_SFB_AUTO, nullptr,
                                   0),
            TIDEGATE_ERR_INVALID_ARGUMENT);
  tidegate_tensor_t doubles = tu;
  doubles.dtype = TIDEGATE_FLOAT64;
  EXPECT_EQ(tidegate_sfb_allreduce(comm, &doubles, &tv, &to, TIDEGATE_SUM, TIDEGATE_SFB_AUTO,
                                   nullptr, 0),
            TIDEGATE_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tidegate::testing
