// The collectives that move data without reducing: allgather, allgatherv, broadcast, barrier
// and alltoallv, over ranks {1..5} x sizes {0, 1, 7, 1023, 2^20+3}, the matrix also over the
// real transports that run in threads (tcp, ucx) with fewer dtypes.
#include <atomic>
#include <cstring>
#include <tuple>

#include "test_cases.h"

namespace tidegate::testing {
namespace {

// Per-rank counts for allgatherv: uneven, with empty ranks.
std::vector<int64_t> uneven_counts(int ranks, int64_t count) {
  std::vector<int64_t> counts;
  for (int r = 0; r < ranks; ++r) counts.push_back(r % 3 == 1 ? 0 : count / (r + 1) + r);
  return counts;
}

void check_allgather(int ranks, const std::vector<int64_t>& counts, bool variable, bool in_place,
                     tidegate_dtype_t dtype, const Config& config,
                     const std::string& transport = kLoopback) {
  const size_t element = dtype_size(dtype);
  std::vector<int64_t> displacement;
  int64_t total = 0;
  for (int64_t c : counts) {
    displacement.push_back(total);
    total += c;
  }
  const std::string what = transport + (variable ? " allgatherv " : " allgather ") +
                           dtype_name(dtype) + " P=" + std::to_string(ranks) +
                           " total=" + std::to_string(total) + (in_place ? " in place" : "");
  std::vector<Bytes> inputs;
  Bytes expected;
  for (int r = 0; r < ranks; ++r) {
    inputs.push_back(make_bytes(static_cast<size_t>(counts[r]) * element, 31 + r));
    expected.insert(expected.end(), inputs.back().begin(), inputs.back().end());
  }
  std::vector<Bytes> outputs(static_cast<size_t>(ranks), Bytes(expected.size(), 0xcd));
  if (in_place) {
    for (int r = 0; r < ranks; ++r) {
      std::copy(inputs[r].begin(), inputs[r].end(),
                outputs[r].begin() + displacement[r] * static_cast<int64_t>(element));
    }
  }
  run_expect_ok(
      ranks, config,
      [&](int rank) {
        CollectiveArgs args;
        args.kind = variable ? OpKind::kAllgatherv : OpKind::kAllgather;
        args.op_seq = 3;
        void* in = in_place
                       ? outputs[rank].data() + displacement[rank] * static_cast<int64_t>(element)
                       : inputs[rank].data();
        args.input = view(in, counts[rank], dtype);
        args.output = view(outputs[rank].data(), total, dtype);
        if (variable) args.counts = counts;
        return args;
      },
      what, "ring", on(transport));
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(first_difference(outputs[r], expected, element), -1) << what << ": rank " << r;
  }
}

class AllgatherTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(AllgatherTest, EveryRankGetsEveryBlock) {
  const auto [transport, ranks, count] = GetParam();
  TIDEGATE_REQUIRE_TRANSPORT(transport, ranks);
  const Config config;
  const std::vector<int64_t> equal(static_cast<size_t>(ranks), count);
  for (tidegate_dtype_t dtype :
       {TIDEGATE_FLOAT32, TIDEGATE_FLOAT64, TIDEGATE_FLOAT16, TIDEGATE_UINT8}) {
    for (bool in_place : {false, true}) {
      check_allgather(ranks, equal, false, in_place, dtype, config, transport);
      check_allgather(ranks, uneven_counts(ranks, count), true, in_place, dtype, config, transport);
      if (count >= kLargeCount) break;
    }
    if (count >= kLargeCount || !is_loopback(transport)) break;  // real transports: f32 only
  }
}

TIDEGATE_MATRIX_INSTANTIATE(AllgatherTest, size_cases, size_case_name);

TEST(AllgatherPipeline, ManySegmentsStreamAroundTheRing) {
  const Config config = make_config({{"TIDEGATE_SEGMENT_BYTES", "4096"}});
  for (int ranks : world_sizes()) {
    check_allgather(ranks, std::vector<int64_t>(static_cast<size_t>(ranks), 20011), false, false,
                    TIDEGATE_FLOAT32, config);
    check_allgather(ranks, uneven_counts(ranks, 30011), true, true, TIDEGATE_UINT8, config);
  }
}

// ---------------------------------------------------------------------------------------

void check_broadcast(int ranks, int64_t count, int root, tidegate_dtype_t dtype,
                     const Config& config, const std::string& transport = kLoopback) {
  const std::string what = transport + " broadcast " + dtype_name(dtype) +
                           " P=" + std::to_string(ranks) + " N=" + std::to_string(count) +
                           " root=" + std::to_string(root);
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  const Bytes expected = make_bytes(bytes, 77);
  std::vector<Bytes> tensors(static_cast<size_t>(ranks), Bytes(bytes, 0xcd));
  tensors[root] = expected;
  run_expect_ok(
      ranks, config,
      [&](int rank) {
        CollectiveArgs args;
        args.kind = OpKind::kBroadcast;
        args.op_seq = 4;
        args.root = root;
        args.input = args.output = view(tensors[rank].data(), count, dtype);
        return args;
      },
      what, "binomial", on(transport));
  for (int r = 0; r < ranks; ++r) {
    ASSERT_EQ(first_difference(tensors[r], expected, 1), -1) << what << ": rank " << r;
  }
}

class BroadcastTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(BroadcastTest, EveryRankGetsTheRootsTensor) {
  const auto [transport, ranks, count] = GetParam();
  TIDEGATE_REQUIRE_TRANSPORT(transport, ranks);
  const Config config;
  for (int root = 0; root < ranks; ++root) {
    check_broadcast(ranks, count, root, TIDEGATE_FLOAT32, config, transport);
    if (count < kLargeCount && is_loopback(transport))
      check_broadcast(ranks, count, root, TIDEGATE_UINT8, config);
  }
}

TIDEGATE_MATRIX_INSTANTIATE(BroadcastTest, size_cases, size_case_name);

TEST(BroadcastPipeline, ManySegmentsStreamDownTheTree) {
  const Config config = make_config({{"TIDEGATE_SEGMENT_BYTES", "4096"}});
  for (int ranks : world_sizes())
    check_broadcast(ranks, 100003, ranks / 2, TIDEGATE_FLOAT64, config);
}

// ---------------------------------------------------------------------------------------

TEST(BarrierTest, NoRankLeavesBeforeAllEntered) {
  const Config config;
  for (int ranks : world_sizes()) {
    std::atomic<int> entered{0};
    std::atomic<int> early{0};
    const std::vector<Status> results = run_ranks(ranks, config, [&](const TaskContext& context) {
      for (uint64_t seq = 1; seq <= 3; ++seq) {
        if (seq == 1) entered.fetch_add(1);
        CollectiveArgs args;
        args.kind = OpKind::kBarrier;
        args.op_seq = seq;
        TG_RETURN_IF_ERROR(run_collective(context, args, Deadline::after_ms(60000)));
        if (seq == 1 && entered.load() != ranks) early.fetch_add(1);
      }
      return Status::ok();
    });
    for (const Status& status : results) ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(early.load(), 0) << "P=" << ranks;
  }
}

// ---------------------------------------------------------------------------------------

// Elements rank `from` sends to rank `to`.
int64_t pair_count(int from, int to, int64_t count) {
  return count * ((from * 3 + to * 5) % 4) / 3;
}

void check_alltoallv(int ranks, int64_t count, tidegate_dtype_t dtype, const Config& config,
                     const std::string& transport = kLoopback) {
  const std::string what = transport + " alltoallv " + dtype_name(dtype) +
                           " P=" + std::to_string(ranks) + " N=" + std::to_string(count);
  const size_t element = dtype_size(dtype);
  struct Layout {
    std::vector<int64_t> counts, offsets;
    int64_t total = 0;
  };
  // Blocks are packed with one-element gaps, which must stay untouched.
  auto layout = [&](int rank, bool sending) {
    Layout l;
    for (int p = 0; p < ranks; ++p) {
      l.counts.push_back(sending ? pair_count(rank, p, count) : pair_count(p, rank, count));
      l.offsets.push_back(l.total);
      l.total += l.counts.back() + 1;
    }
    return l;
  };
  std::vector<Layout> sends, recvs;
  std::vector<Bytes> inputs, outputs;
  for (int r = 0; r < ranks; ++r) {
    sends.push_back(layout(r, true));
    recvs.push_back(layout(r, false));
    inputs.push_back(make_bytes(static_cast<size_t>(sends[r].total) * element, 400 + r));
    outputs.emplace_back(static_cast<size_t>(recvs[r].total) * element, 0xcd);
  }
  run_expect_ok(
      ranks, config,
      [&](int rank) {
        CollectiveArgs args;
        args.kind = OpKind::kAlltoallv;
        args.op_seq = 6;
        args.input = view(inputs[rank].data(), sends[rank].total, dtype);
        args.output = view(outputs[rank].data(), recvs[rank].total, dtype);
        args.send_counts = sends[rank].counts;
        args.send_offsets = sends[rank].offsets;
        args.recv_counts = recvs[rank].counts;
        args.recv_offsets = recvs[rank].offsets;
        return args;
      },
      what, "pairwise", on(transport));
  for (int r = 0; r < ranks; ++r) {
    Bytes expected(outputs[r].size(), 0xcd);
    for (int p = 0; p < ranks; ++p) {
      const auto from = inputs[p].begin() + sends[p].offsets[r] * static_cast<int64_t>(element);
      std::copy(from, from + pair_count(p, r, count) * static_cast<int64_t>(element),
                expected.begin() + recvs[r].offsets[p] * static_cast<int64_t>(element));
    }
    ASSERT_EQ(first_difference(outputs[r], expected, element), -1) << what << ": rank " << r;
  }
}

class AlltoallvTest : public ::testing::TestWithParam<SizeCase> {};

TEST_P(AlltoallvTest, EveryPairExchangesItsBlock) {
  const auto [transport, ranks, count] = GetParam();
  TIDEGATE_REQUIRE_TRANSPORT(transport, ranks);
  const Config config;
  check_alltoallv(ranks, count, TIDEGATE_FLOAT32, config, transport);
  if (count < kLargeCount && is_loopback(transport))
    check_alltoallv(ranks, count, TIDEGATE_UINT8, config);
}

TIDEGATE_MATRIX_INSTANTIATE(AlltoallvTest, size_cases, size_case_name);

}  // namespace
}  // namespace tidegate::testing
