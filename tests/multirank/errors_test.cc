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
  void SetUp() override { setenv("TIDEGATE_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1); }
  void TearDown() override { unsetenv("TIDEGATE_TIMEOUT_MS"); }

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
