// tidegate-bench's result checking, without a communicator: every "rank" of a BenchCase is
// built in one process, the collective is emulated with the library's own reduction kernel,
// and every rank's check must then find zero wrong elements - while a single flipped element
// must be found. This keeps the benchmark's #wrong column trustworthy on its own.
#include "bench/tidegate_bench/bench_case.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "numeric/reduce.h"

namespace tidegate::bench {
namespace {

struct World {
  std::vector<std::unique_ptr<BenchCase>> ranks;
};

World make_world(Collective c, tidegate_dtype_t dtype, tidegate_reduce_op_t op, int size,
                 int64_t bytes) {
  World w;
  for (int r = 0; r < size; ++r) {
    w.ranks.push_back(std::make_unique<BenchCase>(c, dtype, op, /*root=*/size - 1, r, size, bytes));
    w.ranks.back()->fill();
  }
  return w;
}

size_t elem(const BenchCase& c) { return tidegate_dtype_size(c.dtype()); }

// What a correct collective leaves in every rank's output.
void emulate(World& w) {
  const int size = static_cast<int>(w.ranks.size());
  BenchCase& first = *w.ranks[0];
  const size_t e = elem(first);
  switch (first.collective()) {
    case Collective::kAllreduce:
    case Collective::kReduceScatter: {
      std::vector<unsigned char> acc(static_cast<size_t>(first.input_count()) * e);
      std::memcpy(acc.data(), first.input(), acc.size());
      for (int r = 1; r < size; ++r) {
        reduce(acc.data(), acc.data(), w.ranks[r]->input(), first.input_count(), first.dtype(),
               first.op());
      }
      if (first.op() == TIDEGATE_AVG)
        finalize_average(acc.data(), first.input_count(), first.dtype(), size);
      for (int r = 0; r < size; ++r) {
        const int64_t offset =
            first.collective() == Collective::kAllreduce ? 0 : first.rank_offsets()[r];
        std::memcpy(w.ranks[r]->output(), acc.data() + offset * e, w.ranks[r]->output_count() * e);
      }
      break;
    }
    case Collective::kAllgather:
    case Collective::kAllgatherv:
      for (auto& dst : w.ranks) {
        for (int r = 0; r < size; ++r) {
          std::memcpy(static_cast<char*>(dst->output()) + first.rank_offsets()[r] * e,
                      w.ranks[r]->input(), w.ranks[r]->input_count() * e);
        }
      }
      break;
    case Collective::kBroadcast:
      for (auto& dst : w.ranks) {
        std::memcpy(dst->output(), w.ranks[first.root()]->output(), first.output_count() * e);
      }
      break;
    case Collective::kAlltoallv:
      for (int dst = 0; dst < size; ++dst) {
        for (int src = 0; src < size; ++src) {
          std::memcpy(static_cast<char*>(w.ranks[dst]->output()) + first.rank_offsets()[src] * e,
                      static_cast<char*>(w.ranks[src]->input()) + first.rank_offsets()[dst] * e,
                      first.rank_counts()[dst] * e);
        }
      }
      break;
  }
}

void expect_checks(Collective c, tidegate_dtype_t dtype, tidegate_reduce_op_t op) {
  for (int size : {1, 2, 3, 5}) {
    for (int64_t bytes : {int64_t{0}, int64_t{8}, int64_t{1000}, int64_t{4099}}) {
      SCOPED_TRACE(testing::Message() << traits(c).name << " size " << size << " bytes " << bytes
                                      << " dtype " << dtype << " op " << op);
      World w = make_world(c, dtype, op, size, bytes);
      emulate(w);
      for (auto& rank : w.ranks) EXPECT_EQ(rank->count_wrong(), 0);
      BenchCase& last = *w.ranks.back();
      if (last.output_count() > 0) {
        static_cast<unsigned char*>(last.output())[0] ^= 0x40;  // a wrong bit must be found
        EXPECT_EQ(last.count_wrong(), 1);
      }
    }
  }
}

TEST(BenchCase, ReductionsAreExactForEveryDtypeAndOp) {
  for (Collective c : {Collective::kAllreduce, Collective::kReduceScatter}) {
    for (tidegate_dtype_t d : {TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16,
                               TIDEGATE_BFLOAT16, TIDEGATE_INT32, TIDEGATE_INT64, TIDEGATE_UINT8}) {
      for (tidegate_reduce_op_t op :
           {TIDEGATE_SUM, TIDEGATE_PROD, TIDEGATE_MIN, TIDEGATE_MAX, TIDEGATE_AVG}) {
        expect_checks(c, d, op);
      }
    }
  }
}

TEST(BenchCase, DataMovementCollectivesCheckWhereEachBlockCameFrom) {
  for (Collective c : {Collective::kAllgather, Collective::kAllgatherv, Collective::kBroadcast,
                       Collective::kAlltoallv}) {
    for (tidegate_dtype_t d :
         {TIDEGATE_FLOAT32, TIDEGATE_BFLOAT16, TIDEGATE_UINT8, TIDEGATE_INT64}) {
      expect_checks(c, d, TIDEGATE_SUM);
    }
  }
}

TEST(BenchCase, SizesRoundToWholeShares) {
  BenchCase rs(Collective::kReduceScatter, TIDEGATE_FLOAT32, TIDEGATE_SUM, 0, 1, 3, 1000);
  EXPECT_EQ(rs.count(), 249);  // 250 floats, rounded down to a multiple of 3
  EXPECT_EQ(rs.output_count(), 83);
  BenchCase ag(Collective::kAllgatherv, TIDEGATE_FLOAT32, TIDEGATE_SUM, 0, 0, 3, 1000);
  EXPECT_EQ(ag.count(), 250);  // uneven blocks are fine for allgatherv
  EXPECT_EQ(ag.input_count(), 84);
}

TEST(BenchCase, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::kBroadcast, 4), 1.0);
}

}  // namespace
}  // namespace tidegate::bench
