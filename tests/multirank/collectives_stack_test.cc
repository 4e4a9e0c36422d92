// The other collectives through the whole stack, ranks as threads over loopback TCP: values
// against a reference and bitwise identity across ranks, every rank count 1..5 and the sizes
// of the foundation issue, plus several outstanding requests completing in posting order.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <tuple>
#include <vector>

#include "test_values.h"
#include "thread_world.h"

namespace tidegate::testing {
namespace {

using Param = std::tuple<int, int64_t, tidegate_dtype_t>;
class CollectivesStack : public ::testing::TestWithParam<Param> {};

// Distinct per (rank, index) so misplaced blocks are caught; exact in every dtype (< 256).
double tag_value(int rank, int64_t i) { return static_cast<double>((rank * 37 + i * 11) % 200); }

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(CollectivesStack, ReduceScatterGivesEachRankItsBlock) {
  const auto [ranks, count, dtype] = GetParam();
  ThreadWorld& world = ThreadWorld::shared(ranks);
  std::vector<std::string> errors(ranks);
  world.run([&](int rank, tidegate_comm_t comm) {
    const size_t es = tidegate_dtype_size(dtype);
    std::vector<unsigned char> input(static_cast<size_t>(count) * es);
    for (int64_t i = 0; i < count; ++i)
      store_value(input.data(), dtype, i, input_value(rank, i, TIDEGATE_SUM));
    int64_t offset = 0, length = 0;
    tidegate_block_range(count, ranks, rank, &offset, &length);
    std::vector<unsigned char> output(static_cast<size_t>(length) * es);
    tidegate_tensor_t in = tidegate_host_tensor(input.data(), count, dtype);
    tidegate_tensor_t out = tidegate_host_tensor(output.data(), length, dtype);
    if (tidegate_reduce_scatter(comm, &in, &out, TIDEGATE_SUM) != TIDEGATE_OK) {
      errors[rank] = tidegate_last_error();
      return;
    }
    for (int64_t i = 0; i < length; ++i) {
      const double want = expected_value(ranks, offset + i, TIDEGATE_SUM, dtype);
      if (load_value(output.data(), dtype, i) != want) {
        errors[rank] = "element " + std::to_string(offset + i) + " wrong";
        return;
      }
    }
  });
  expect_no_errors(errors);
}

TEST_P(CollectivesStack, AllgatherAndAllgathervAreIdenticalEverywhere) {
  const auto [ranks, count, dtype] = GetParam();
  ThreadWorld& world = ThreadWorld::shared(ranks);
  const size_t es = tidegate_dtype_size(dtype);
  // allgatherv: rank r contributes count + r elements (uneven on purpose).
  std::vector<int64_t> counts(ranks);
  for (int r = 0; r < ranks; ++r) counts[r] = count + r;
  const int64_t total_v = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<std::vector<unsigned char>> gathered(ranks), gathered_v(ranks);
  std::vector<std::string> errors(ranks);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<unsigned char> mine(static_cast<size_t>(count + rank) * es);
    for (int64_t i = 0; i < count + rank; ++i)
      store_value(mine.data(), dtype, i, tag_value(rank, i));
    gathered[rank].resize(static_cast<size_t>(count * ranks) * es);
    gathered_v[rank].resize(static_cast<size_t>(total_v) * es);
    tidegate_tensor_t in = tidegate_host_tensor(mine.data(), count, dtype);
    tidegate_tensor_t out = tidegate_host_tensor(gathered[rank].data(), count * ranks, dtype);
    tidegate_tensor_t in_v = tidegate_host_tensor(mine.data(), count + rank, dtype);
    tidegate_tensor_t out_v = tidegate_host_tensor(gathered_v[rank].data(), total_v, dtype);
    if (tidegate_allgather(comm, &in, &out) != TIDEGATE_OK ||
        tidegate_allgatherv(comm, &in_v, &out_v, counts.data()) != TIDEGATE_OK) {
      errors[rank] = tidegate_last_error();
    }
  });
  expect_no_errors(errors);
  int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(load_value(gathered[0].data(), dtype, r * count + i), tag_value(r, i));
    }
    for (int64_t i = 0; i < counts[r]; ++i, ++at) {
      ASSERT_EQ(load_value(gathered_v[0].data(), dtype, at), tag_value(r, i));
    }
  }
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(gathered[0], gathered[r]);
    EXPECT_EQ(gathered_v[0], gathered_v[r]);
  }
}

TEST_P(CollectivesStack, BroadcastFromEveryRoot) {
  const auto [ranks, count, dtype] = GetParam();
  ThreadWorld& world = ThreadWorld::shared(ranks);
  const size_t es = tidegate_dtype_size(dtype);
  for (int root = 0; root < ranks; ++root) {
    std::vector<std::string> errors(ranks);
    world.run([&](int rank, tidegate_comm_t comm) {
      std::vector<unsigned char> data(static_cast<size_t>(count) * es, 0xEE);
      if (rank == root) {
        for (int64_t i = 0; i < count; ++i) store_value(data.data(), dtype, i, tag_value(root, i));
      }
      tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, dtype);
      if (tidegate_broadcast(comm, &t, root) != TIDEGATE_OK) {
        errors[rank] = tidegate_last_error();
        return;
      }
      for (int64_t i = 0; i < count; ++i) {
        if (load_value(data.data(), dtype, i) != tag_value(root, i)) {
          errors[rank] =
              "root " + std::to_string(root) + ": element " + std::to_string(i) + " wrong";
          return;
        }
      }
    });
    expect_no_errors(errors);
  }
}

TEST_P(CollectivesStack, AlltoallvDeliversEveryBlock) {
  const auto [ranks, count, dtype] = GetParam();
  ThreadWorld& world = ThreadWorld::shared(ranks);
  const size_t es = tidegate_dtype_size(dtype);
  // Rank s sends (count + s + d) % 5 + count/ranks elements to rank d: uneven in both directions.
  auto block = [&](int s, int d) { return (count + s + d) % 5 + count / ranks; };
  std::vector<std::string> errors(ranks);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<int64_t> sc(ranks), so(ranks), rc(ranks), ro(ranks);
    int64_t st = 0, rt = 0;
    for (int p = 0; p < ranks; ++p) {
      sc[p] = block(rank, p);
      so[p] = st;
      st += sc[p];
      rc[p] = block(p, rank);
      ro[p] = rt;
      rt += rc[p];
    }
    std::vector<unsigned char> in(static_cast<size_t>(st) * es), out(static_cast<size_t>(rt) * es);
    for (int p = 0; p < ranks; ++p)
      for (int64_t i = 0; i < sc[p]; ++i)
        store_value(in.data(), dtype, so[p] + i, tag_value(rank * 7 + p, i));
    tidegate_tensor_t tin = tidegate_host_tensor(in.data(), st, dtype);
    tidegate_tensor_t tout = tidegate_host_tensor(out.data(), rt, dtype);
    if (tidegate_alltoallv(comm, &tin, sc.data(), so.data(), &tout, rc.data(), ro.data()) !=
        TIDEGATE_OK) {
      errors[rank] = tidegate_last_error();
      return;
    }
    for (int p = 0; p < ranks; ++p)
      for (int64_t i = 0; i < rc[p]; ++i)
        if (load_value(out.data(), dtype, ro[p] + i) != tag_value(p * 7 + rank, i)) {
          errors[rank] = "block from rank " + std::to_string(p) + " wrong at " + std::to_string(i);
          return;
        }
  });
  expect_no_errors(errors);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto [ranks, count, dtype] = info.param;
  static const char* dtypes[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8"};
  return "r" + std::to_string(ranks) + "_n" + std::to_string(count) + "_" + dtypes[dtype];
}

INSTANTIATE_TEST_SUITE_P(RanksSizesDtypes, CollectivesStack,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values<int64_t>(0, 1, 7, 1023,
                                                                       (int64_t{1} << 20) + 3),
                                            ::testing::Values(TIDEGATE_FLOAT32, TIDEGATE_BFLOAT16,
                                                              TIDEGATE_INT64, TIDEGATE_UINT8)),
                         param_name);

TEST(RequestsStack, SeveralOutstandingCompleteInPostingOrder) {
  ThreadWorld& world = ThreadWorld::shared(3);
  constexpr int kOps = 8;
  std::vector<std::string> errors(3);
  world.run([&](int rank, tidegate_comm_t comm) {
    std::vector<std::vector<int32_t>> buffers(kOps, std::vector<int32_t>(4096));
    std::vector<tidegate_request_t> requests(kOps);
    for (int k = 0; k < kOps; ++k) {
      std::fill(buffers[k].begin(), buffers[k].end(), rank + k);
      tidegate_tensor_t t = tidegate_host_tensor(buffers[k].data(), 4096, TIDEGATE_INT32);
      if (tidegate_iallreduce(comm, &t, &t, TIDEGATE_SUM, &requests[k]) != TIDEGATE_OK) {
        errors[rank] = tidegate_last_error();
        return;
      }
    }
    // Waiting on the last one first: when it is done, every earlier one must be done too.
    if (tidegate_request_wait(requests[kOps - 1], 60000) != TIDEGATE_OK)
      errors[rank] = tidegate_last_error();
    for (int k = 0; k < kOps; ++k) {
      int done = 0;
      if (tidegate_request_test(requests[k], &done) != TIDEGATE_OK || !done)
        errors[rank] = "op " + std::to_string(k) + " not done";
      if (buffers[k][17] != 0 + 1 + 2 + 3 * k) errors[rank] = "op " + std::to_string(k) + " wrong";
      tidegate_request_free(requests[k]);
    }
  });
  expect_no_errors(errors);
}

TEST(RequestsStack, BarrierCompletesOnEveryRank) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    std::vector<tidegate_status_t> results(ranks, TIDEGATE_ERR_INTERNAL);
    ThreadWorld::shared(ranks).run(
        [&](int rank, tidegate_comm_t comm) { results[rank] = tidegate_barrier(comm); });
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(results[r], TIDEGATE_OK) << "ranks " << ranks << " rank " << r;
  }
}

}  // namespace
}  // namespace tidegate::testing
