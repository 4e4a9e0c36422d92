// Bad input across ranks through the whole stack: mismatched collectives fail on every rank
// with an error naming both ranks, the op and the field; a rank that never posts turns into a
// timeout on the others within the deadline; an abort reaches every peer; bad local arguments
// are refused without harming the communicator.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <vector>

#include "thread_world.h"

namespace tidegate::testing {
namespace {

constexpr int64_t kTimeoutMs = 2000;

struct Outcome {
  tidegate_status_t status = TIDEGATE_OK;
  std::string message;
  double seconds = 0;
};

class ErrorsStack : public ::testing::Test {
 protected:
  // The short deadline bounds creation too: the bandwidth probe (800 ms of measuring, not what
  // these tests check) then failed creation on a loaded 2-core machine ("bandwidth probe ...
  // no answer before the deadline"), so these worlds plan without it.
  void SetUp() override {
    setenv("TIDEGATE_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
    setenv("TIDEGATE_PROBE", "off", 1);
  }
  void TearDown() override {
    unsetenv("TIDEGATE_TIMEOUT_MS");
    unsetenv("TIDEGATE_PROBE");
  }

  // Runs body on every rank of a fresh world, timing each rank's call.
  std::vector<Outcome> run(int ranks,
                           const std::function<tidegate_status_t(int, tidegate_comm_t)>& body) {
    ThreadWorld world(ranks);
    std::vector<Outcome> outcomes(ranks);
    world.run([&](int rank, tidegate_comm_t comm) {
      const auto start = std::chrono::steady_clock::now();
      outcomes[rank].status = body(rank, comm);
      outcomes[rank].message = tidegate_last_error();
      outcomes[rank].seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
    return outcomes;
  }
};

tidegate_status_t allreduce(tidegate_comm_t comm, int64_t count, tidegate_dtype_t dtype,
                            tidegate_reduce_op_t op = TIDEGATE_SUM) {
  std::vector<double> data(static_cast<size_t>(count) + 1, 1.0);  // large enough for any dtype
  tidegate_tensor_t t = tidegate_host_tensor(data.data(), count, dtype);
  return tidegate_allreduce(comm, &t, &t, op);
}

TEST_F(ErrorsStack, CountMismatchNamesRanksOpAndFieldOnEveryRank) {
  auto outcomes = run(3, [](int rank, tidegate_comm_t comm) {
    return allreduce(comm, rank == 1 ? 1000 : 1001, TIDEGATE_FLOAT32);
  });
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + outcomes[r].message);
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_MISMATCH);
    EXPECT_NE(outcomes[r].message.find("op #0"), std::string::npos);
    EXPECT_NE(outcomes[r].message.find("field 'count'"), std::string::npos);
    EXPECT_NE(outcomes[r].message.find("rank 1"), std::string::npos);
    EXPECT_LT(outcomes[r].seconds, kTimeoutMs / 1000.0)
        << "mismatch must be found at the first message";
  }
}

TEST_F(ErrorsStack, DtypeMismatchIsNamed) {
  auto outcomes = run(2, [](int rank, tidegate_comm_t comm) {
    return allreduce(comm, 64, rank == 0 ? TIDEGATE_FLOAT32 : TIDEGATE_INT32);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_MISMATCH) << outcomes[r].message;
    EXPECT_NE(outcomes[r].message.find("dtype"), std::string::npos) << outcomes[r].message;
  }
}

TEST_F(ErrorsStack, ReduceOpMismatchIsNamed) {
  auto outcomes = run(2, [](int rank, tidegate_comm_t comm) {
    return allreduce(comm, 64, TIDEGATE_FLOAT32, rank == 0 ? TIDEGATE_SUM : TIDEGATE_MAX);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_MISMATCH) << outcomes[r].message;
    EXPECT_NE(outcomes[r].message.find("reduce op"), std::string::npos) << outcomes[r].message;
  }
}

// A broadcast's tree is shaped by its root: ranks that disagree on it may never exchange a
// message that compares headers (each taking itself for the root finishes at once), so the op
// checks its identity first. Every size fails the same way, at once, naming the field and ranks.
TEST_F(ErrorsStack, BroadcastRootMismatchIsNamedOnEveryRank) {
  for (int64_t bytes : {int64_t{1} << 10, int64_t{64} << 10, int64_t{16} << 20}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    auto outcomes = run(3, [bytes](int rank, tidegate_comm_t comm) {
      std::vector<char> data(static_cast<size_t>(bytes), static_cast<char>(rank));
      tidegate_tensor_t t = tidegate_host_tensor(data.data(), bytes, TIDEGATE_UINT8);
      return tidegate_broadcast(comm, &t, rank == 1 ? 1 : 0);  // rank 1 takes itself for root
    });
    for (int r = 0; r < 3; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + outcomes[r].message);
      EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_MISMATCH);
      EXPECT_NE(outcomes[r].message.find("field 'root'"), std::string::npos);
      EXPECT_NE(outcomes[r].message.find("rank 1"), std::string::npos);
      EXPECT_NE(outcomes[r].message.find("broadcast op #0"), std::string::npos);
      EXPECT_LT(outcomes[r].seconds, kTimeoutMs / 1000.0) << "found at the first message";
    }
  }
}

// The same call shape gets the same verdict on every rank: both in-place shapes (the output at
// the input's start, or at the rank's own block; on rank 0 they are one shape) are accepted and
// computed everywhere, and any other overlap is refused everywhere.
TEST_F(ErrorsStack, ReduceScatterOverlapGetsOneVerdictOnEveryRank) {
  constexpr int kRanks = 3;
  constexpr int64_t kCount = 3 * 1000 + 2;  // uneven blocks
  enum Shape { kOwnBlock, kInputStart, kShifted };
  for (Shape shape : {kOwnBlock, kInputStart, kShifted}) {
    SCOPED_TRACE("shape " + std::to_string(shape));
    std::vector<std::vector<float>> results(kRanks);
    auto outcomes = run(kRanks, [&](int rank, tidegate_comm_t comm) {
      std::vector<float> data(kCount);
      for (int64_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(rank + 1) * (i % 7);
      int64_t offset = 0, length = 0;
      tidegate_block_range(kCount, kRanks, rank, &offset, &length);
      float* out = shape == kOwnBlock ? data.data() + offset
                                      : (shape == kInputStart ? data.data() : data.data() + 1);
      tidegate_tensor_t in = tidegate_host_tensor(data.data(), kCount, TIDEGATE_FLOAT32);
      tidegate_tensor_t to = tidegate_host_tensor(out, length, TIDEGATE_FLOAT32);
      const tidegate_status_t st = tidegate_reduce_scatter(comm, &in, &to, TIDEGATE_SUM);
      results[rank].assign(out, out + length);
      for (int64_t i = 0; st == TIDEGATE_OK && i < length; ++i) {
        if (out[i] != 6.0f * ((offset + i) % 7)) return TIDEGATE_ERR_INTERNAL;  // 1+2+3 = 6
      }
      return st;
    });
    for (int r = 0; r < kRanks; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + outcomes[r].message);
      EXPECT_EQ(outcomes[r].status,
                shape == kShifted ? TIDEGATE_ERR_INVALID_ARGUMENT : TIDEGATE_OK);
    }
  }
}

// After a timeout the message names the op once (not "allreduce op #0: allreduce op #0 ..."),
// names the rank it waits for, and the communicator can still be destroyed cleanly: destroy
// reports its own outcome, not the earlier failure.
TEST_F(ErrorsStack, TimeoutNamesTheOpOnceAndTheAwaitedRankAndDestroyIsClean) {
  std::vector<tidegate_status_t> destroyed(3, TIDEGATE_ERR_INTERNAL);
  std::vector<std::string> messages(3);
  {
    ThreadWorld world(3);
    world.run([&](int rank, tidegate_comm_t comm) {
      if (rank != 2) {
        std::vector<float> data(1 << 10, 1.0f);
        tidegate_tensor_t t = tidegate_host_tensor(data.data(), 1 << 10, TIDEGATE_FLOAT32);
        tidegate_allreduce(comm, &t, &t, TIDEGATE_SUM);
        messages[rank] = tidegate_last_error();
      }
    });
    // Rank 2 never posted; the others failed. Each destroys its own communicator now.
    world.run(
        [&](int rank, tidegate_comm_t comm) { destroyed[rank] = tidegate_comm_destroy(comm); });
    world.forget();
  }
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + messages[r]);
    const std::string& m = messages[r];
    const size_t first = m.find("allreduce op #0");
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(m.find("allreduce op #0", first + 1), std::string::npos) << "the op is named twice";
    EXPECT_NE(m.find("waiting for rank"), std::string::npos);
    EXPECT_EQ(destroyed[r], TIDEGATE_OK);
  }
  EXPECT_EQ(destroyed[2], TIDEGATE_OK);
}

// A count far beyond any memory on a small buffer is refused at once, not run.
TEST_F(ErrorsStack, ImpossibleCountIsRefusedAndTheCommunicatorStaysHealthy) {
  auto outcomes = run(2, [](int, tidegate_comm_t comm) -> tidegate_status_t {
    float data[4] = {1, 2, 3, 4};
    for (int64_t count : {int64_t{1} << 56, int64_t{1} << 46}) {
      for (tidegate_dtype_t dtype : {TIDEGATE_FLOAT64, TIDEGATE_UINT8}) {
        tidegate_tensor_t huge = tidegate_host_tensor(data, count, dtype);
        if (dtype == TIDEGATE_UINT8 && count == int64_t{1} << 46) continue;  // 64 TiB: plausible
        if (tidegate_allreduce(comm, &huge, &huge, TIDEGATE_SUM) != TIDEGATE_ERR_INVALID_ARGUMENT)
          return TIDEGATE_ERR_INTERNAL;
        if (tidegate_broadcast(comm, &huge, 0) != TIDEGATE_ERR_INVALID_ARGUMENT)
          return TIDEGATE_ERR_INTERNAL;
      }
    }
    tidegate_tensor_t good = tidegate_host_tensor(data, 4, TIDEGATE_FLOAT32);
    const tidegate_status_t st = tidegate_allreduce(comm, &good, &good, TIDEGATE_SUM);
    if (st != TIDEGATE_OK) return st;
    return data[3] == 8.0f ? TIDEGATE_OK : TIDEGATE_ERR_INTERNAL;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(outcomes[r].status, TIDEGATE_OK) << outcomes[r].message;
    EXPECT_LT(outcomes[r].seconds, kTimeoutMs / 1000.0);
  }
}

TEST_F(ErrorsStack, PeerThatNeverPostsEndsInTimeoutWithinTheDeadline) {
  auto outcomes = run(3, [](int rank, tidegate_comm_t comm) -> tidegate_status_t {
    if (rank == 2) return TIDEGATE_OK;  // never posts
    return allreduce(comm, 1 << 16, TIDEGATE_FLOAT32);
  });
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + outcomes[r].message);
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_TIMEOUT);
    EXPECT_NE(outcomes[r].message.find("no progress"), std::string::npos);
    EXPECT_GE(outcomes[r].seconds, kTimeoutMs / 1000.0 * 0.9);
    EXPECT_LT(outcomes[r].seconds, kTimeoutMs / 1000.0 + 3.0);
  }
}

TEST_F(ErrorsStack, AbortReachesPeersWaitingInACollective) {
  auto outcomes = run(3, [](int rank, tidegate_comm_t comm) -> tidegate_status_t {
    if (rank == 0) return tidegate_comm_abort(comm, "test abort");
    return allreduce(comm, 1 << 16, TIDEGATE_FLOAT32);
  });
  EXPECT_EQ(outcomes[0].status, TIDEGATE_OK);
  for (int r = 1; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + outcomes[r].message);
    EXPECT_EQ(outcomes[r].status, TIDEGATE_ERR_ABORTED);
    EXPECT_NE(outcomes[r].message.find("rank 0"), std::string::npos);
    EXPECT_LT(outcomes[r].seconds, kTimeoutMs / 1000.0);
  }
}

TEST_F(ErrorsStack, BadLocalArgumentsAreRefusedAndTheCommunicatorStaysHealthy) {
  auto outcomes = run(2, [](int, tidegate_comm_t comm) -> tidegate_status_t {
    float data[4] = {1, 2, 3, 4};
    tidegate_tensor_t good = tidegate_host_tensor(data, 4, TIDEGATE_FLOAT32);
    tidegate_tensor_t negative = tidegate_host_tensor(data, -1, TIDEGATE_FLOAT32);
    tidegate_tensor_t null_data = tidegate_host_tensor(nullptr, 4, TIDEGATE_FLOAT32);
    tidegate_tensor_t shorter = tidegate_host_tensor(data, 3, TIDEGATE_FLOAT32);
    tidegate_tensor_t bad_dtype = good;
    bad_dtype.dtype = static_cast<tidegate_dtype_t>(42);
    if (tidegate_allreduce(comm, &negative, &negative, TIDEGATE_SUM) !=
        TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    if (tidegate_allreduce(comm, &null_data, &null_data, TIDEGATE_SUM) !=
        TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    if (tidegate_allreduce(comm, &good, &shorter, TIDEGATE_SUM) != TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    if (tidegate_allreduce(comm, &bad_dtype, &bad_dtype, TIDEGATE_SUM) !=
        TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    if (tidegate_allreduce(comm, &good, &good, static_cast<tidegate_reduce_op_t>(9)) !=
        TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    if (tidegate_broadcast(comm, &good, 7) != TIDEGATE_ERR_INVALID_ARGUMENT)
      return TIDEGATE_ERR_INTERNAL;
    // A zero-size tensor may have a NULL pointer.
    tidegate_tensor_t empty = tidegate_host_tensor(nullptr, 0, TIDEGATE_FLOAT32);
    tidegate_status_t st = tidegate_allreduce(comm, &empty, &empty, TIDEGATE_SUM);
    if (st != TIDEGATE_OK) return st;
    st = tidegate_allreduce(comm, &good, &good, TIDEGATE_SUM);
    if (st != TIDEGATE_OK) return st;
    return data[3] == 8.0f ? TIDEGATE_OK : TIDEGATE_ERR_INTERNAL;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(outcomes[r].status, TIDEGATE_OK) << outcomes[r].message;
}

TEST(ErrorsApi, StatusStringsAndNullHandles) {
  EXPECT_STREQ(tidegate_status_string(TIDEGATE_ERR_TIMEOUT), "timeout");
  EXPECT_STREQ(tidegate_status_string(static_cast<tidegate_status_t>(999)), "unknown status");
  int rank = 0;
  EXPECT_EQ(tidegate_comm_rank(nullptr, &rank), TIDEGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tidegate_last_error()), "");
  EXPECT_EQ(tidegate_comm_destroy(nullptr), TIDEGATE_OK);
  tidegate_request_free(nullptr);
}

}  // namespace
}  // namespace tidegate::testing
