// main() of the suite under mpirun: one gtest process per rank. Every rank runs the same cases
// in the same order; the job's verdict is agreed over MPI, so mpirun's exit code is every
// rank's: 1 when a case failed on any rank, 77 (CTest's skip) when every case was skipped
// (this job cannot run the transport here), 0 otherwise.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdio>

namespace {

constexpr int kSkipExitCode = 77;

// Ranks other than 0 print only their failures, each line naming the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                 result.file_name() == nullptr ? "?" : result.file_name(), result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  const int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  // The mpi transport drives MPI from its progress thread while the bodies call MPI too.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  int mine[2] = {failed, unit.successful_test_count() > 0 ? 1 : 0};
  int any[2] = {0, 0};
  MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int code = 0;
  if (any[0] != 0) {
    code = 1;
  } else if (any[1] == 0) {
    if (rank == 0) std::printf("SKIP: every case was skipped (reasons above)\n");
    code = kSkipExitCode;
  }
  MPI_Finalize();
  return code;
}
