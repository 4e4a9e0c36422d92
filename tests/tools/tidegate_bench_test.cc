// tidegate-bench end to end: under tidegate-run (and under mpirun with the MPI baseline when
// MPI is built) over several collectives, dtypes and ops with -c 1, reading the JSON rows and
// requiring #wrong == 0 on each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string>

#include "subprocess.h"

namespace tidegate::testing {
namespace {

using std::chrono::seconds;

// The value of "key" in a flat JSON object line: a number or a string (unquoted here).
std::string json_field(const std::string& line, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  size_t pos = line.find(needle);
  if (pos == std::string::npos) return "";
  pos += needle.size();
  if (line[pos] == '"') return line.substr(pos + 1, line.find('"', pos + 1) - pos - 1);
  return line.substr(pos, line.find_first_of(",}", pos) - pos);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class TempPath {
 public:
  TempPath() {
    char name[] = "/tmp/tidegate-bench-test-XXXXXX";
    int fd = ::mkstemp(name);
    if (fd >= 0) ::close(fd);
    path_ = name;
  }
  ~TempPath() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct BenchRun {
  std::string collective, dtype, op;
};

// Readable parameter names in test output (instead of the struct's bytes).
void PrintTo(const BenchRun& run, std::ostream* os) {
  *os << run.collective << "/" << run.dtype << "/" << run.op;
}

std::string name_of(const ::testing::TestParamInfo<BenchRun>& info) {
  return info.param.collective + "_" + info.param.dtype + "_" + info.param.op;
}

std::vector<std::string> bench_args(const BenchRun& run, const std::string& json) {
  return {TIDEGATE_BENCH_PATH,
          "-C",
          run.collective,
          "-d",
          run.dtype,
          "-o",
          run.op,
          "-b",
          "0",
          "-e",
          "300K",
          "-f",
          "7",
          "-n",
          "2",
          "-w",
          "1",
          "-c",
          "1",
          "--json",
          json};
}

// Every row checked and correct, with the fields the README promises.
void expect_clean_rows(const std::string& json, const BenchRun& run, bool baseline) {
  std::vector<std::string> rows = read_lines(json);
  ASSERT_GE(rows.size(), 5u) << "sizes from 0 up to 300K, factor 7";
  EXPECT_EQ(json_field(rows[0], "count"), "0");
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(json_field(row, "wrong"), "0");
    EXPECT_EQ(json_field(row, "collective"), run.collective);
    EXPECT_EQ(json_field(row, "ranks"), "3");
    for (const char* key :
         {"bytes", "count", "dtype", "transport", "algo", "time_us", "algbw_GBps", "busbw_GBps"}) {
      EXPECT_FALSE(json_field(row, key).empty()) << key;
    }
    if (!json_field(row, "inplace_wrong").empty()) {
      EXPECT_EQ(json_field(row, "inplace_wrong"), "0");
    }
    if (baseline && run.dtype != "half" && run.dtype != "bfloat16") {
      EXPECT_FALSE(json_field(row, "baseline_time_us").empty());
    }
  }
}

class BenchUnderTidegateRun : public ::testing::TestWithParam<BenchRun> {};

TEST_P(BenchUnderTidegateRun, EveryRowIsCorrect) {
  TempPath json;
  std::vector<std::string> argv = {TIDEGATE_RUN_PATH, "-n", "3", "--"};
  for (const std::string& a : bench_args(GetParam(), json.path())) argv.push_back(a);
  ProcessResult r = run_process(argv, seconds(240));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# Avg bus bandwidth"), std::string::npos) << r.out;
  expect_clean_rows(json.path(), GetParam(), false);
}

const BenchRun kRuns[] = {
    {"allreduce", "float", "sum"},       {"allreduce", "int32", "prod"},
    {"allreduce", "half", "avg"},        {"allreduce", "bfloat16", "max"},
    {"reduce_scatter", "double", "min"}, {"allgather", "uint8", "sum"},
    {"allgatherv", "int64", "sum"},      {"broadcast", "bfloat16", "sum"},
    {"alltoallv", "float", "sum"},
};
INSTANTIATE_TEST_SUITE_P(Collectives, BenchUnderTidegateRun, ::testing::ValuesIn(kRuns), name_of);

TEST(BenchUnderTidegateRun, RefusesTheMpiBaselineWithoutMpirun) {
  ProcessResult r = run_process({TIDEGATE_RUN_PATH, "-n", "2", "--", TIDEGATE_BENCH_PATH,
                                 "--baseline", "mpi", "-b", "8", "-e", "8"},
                                seconds(60));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--baseline mpi needs MPI"), std::string::npos) << r.err;
}

// --compare-choices: every row also times each forced transport/algorithm; auto names what it
// ran and its ratio to the fastest forced choice is reported, every result checked.
TEST(BenchUnderTidegateRun, CompareChoicesTimesEveryForcedChoice) {
  TempPath json;
  ProcessResult r = run_process({TIDEGATE_RUN_PATH,
                                 "-n",
                                 "3",
                                 "--",
                                 TIDEGATE_BENCH_PATH,
                                 "-b",
                                 "4K",
                                 "-e",
                                 "256K",
                                 "-f",
                                 "8",
                                 "-n",
                                 "2",
                                 "-w",
                                 "1",
                                 "-I",
                                 "0",
                                 "--compare-choices",
                                 "1",
                                 "--json",
                                 json.path()},
                                seconds(240), {"TIDEGATE_PROBE_BUDGET_MS=200"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("# communicator created in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Worst auto/best-forced time ratio"), std::string::npos) << r.out;
  std::vector<std::string> rows = read_lines(json.path());
  ASSERT_EQ(rows.size(), 3u);
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(json_field(row, "wrong"), "0");
    const std::string algo = json_field(row, "algo");
    EXPECT_NE(algo.find('/'), std::string::npos) << "transport/algorithm";
    // tcp is always there, with its three allreduce algorithms.
    for (const char* choice : {"tcp/ring", "tcp/recursive_doubling", "tcp/rabenseifner"}) {
      EXPECT_NE(row.find(std::string("\"") + choice + "\":"), std::string::npos) << choice;
    }
    EXPECT_FALSE(json_field(row, "best_choice").empty());
    EXPECT_GT(std::stod(json_field(row, "auto_vs_best")), 0.0);
  }
}

// --choices LIST: only the forced choices listed are timed (one the case cannot run is left
// out, not an error).
TEST(BenchUnderTidegateRun, ChoicesTimesOnlyTheListedForcedChoices) {
  TempPath json;
  ProcessResult r = run_process(
      {TIDEGATE_RUN_PATH, "-n", "2", "--", TIDEGATE_BENCH_PATH, "-b", "1K", "-e", "1K", "-n", "2",
       "-w", "1", "-I", "0", "--choices", "tcp/ring,tcp/no_such_algorithm", "--json", json.path()},
      seconds(120), {"TIDEGATE_TRANSPORT=tcp", "TIDEGATE_PROBE=off"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> rows = read_lines(json.path());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(json_field(rows[0], "wrong"), "0");
  EXPECT_NE(rows[0].find("\"choices\":{\"tcp/ring\":"), std::string::npos) << rows[0];
  EXPECT_EQ(rows[0].find("recursive_doubling\":"), std::string::npos) << rows[0];
  EXPECT_EQ(rows[0].find("no_such_algorithm"), std::string::npos) << rows[0];
}

// TIDEGATE_TRANSPORT in the environment is kept when --transport is not given.
TEST(BenchUnderTidegateRun, TransportFromTheEnvironmentIsHonoured) {
  TempPath json;
  ProcessResult r = run_process({TIDEGATE_RUN_PATH, "-n", "2", "--", TIDEGATE_BENCH_PATH, "-b",
                                 "1K", "-e", "1K", "-n", "1", "-w", "0", "--json", json.path()},
                                seconds(120), {"TIDEGATE_TRANSPORT=tcp", "TIDEGATE_PROBE=off"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> rows = read_lines(json.path());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(json_field(rows[0], "transport"), "tcp");
  EXPECT_EQ(json_field(rows[0], "algo").substr(0, 4), "tcp/");
}

// tidegate-bench timing 4 KiB and 64 KiB in turns with the --codec rows `codecs`, checked,
// rows written to `json`.
std::vector<std::string> interleaved_bench_args(const std::string& codecs,
                                                const std::string& json) {
  return {TIDEGATE_BENCH_PATH,
          "-b",
          "4K",
          "-e",
          "64K",
          "-f",
          "16",
          "-n",
          "2",
          "-w",
          "1",
          "-c",
          "1",
          "--interleave",
          "1",
          "--codec",
          codecs,
          "--json",
          json};
}

// --interleave 1: a size's dense and codec rows timed in turns; every row still checked and
// correct, the codec rows after their dense row, a pick named for auto.
TEST(BenchUnderTidegateRun, InterleavedRowsAreCheckedAndCorrect) {
  TempPath json;
  std::vector<std::string> argv = {TIDEGATE_RUN_PATH, "-n", "3", "--"};
  for (const std::string& arg : interleaved_bench_args("auto,topk:ratio=0.01", json.path())) {
    argv.push_back(arg);
  }
  argv.insert(argv.end(), {"--allowed", "topk:ratio=0.01"});
  ProcessResult r = run_process(argv, seconds(240));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> rows = read_lines(json.path());
  ASSERT_EQ(rows.size(), 6u) << "2 sizes x (dense, auto, topk)";
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i]);
    EXPECT_EQ(json_field(rows[i], "wrong"), "0");
    EXPECT_EQ(json_field(rows[i], "bytes"), i < 3 ? "4096" : "65536");
    EXPECT_FALSE(json_field(rows[i], "time_us").empty());
  }
  EXPECT_EQ(json_field(rows[1], "codec"), "auto");
  EXPECT_EQ(json_field(rows[1], "algo").rfind("auto=", 0), 0u);
  EXPECT_EQ(json_field(rows[2], "codec"), "topk:ratio=0.01");
}

TEST(BenchOptions, BadFlagIsExit2WithUsage) {
  ProcessResult r = run_process({TIDEGATE_BENCH_PATH, "-d", "complex"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: tidegate-bench"), std::string::npos) << r.err;
}

#ifdef TIDEGATE_MPIEXEC_PATH
class BenchUnderMpirun : public ::testing::TestWithParam<BenchRun> {};

TEST_P(BenchUnderMpirun, EveryRowIsCorrectAndHasTheBaseline) {
  TempPath json;
  std::vector<std::string> argv = {TIDEGATE_MPIEXEC_PATH, "--allow-run-as-root", "-np", "3",
                                   "--oversubscribe",     "--bind-to",           "none"};
  for (const std::string& a : bench_args(GetParam(), json.path())) argv.push_back(a);
  argv.insert(argv.end(), {"--baseline", "mpi"});
  ProcessResult r = run_process(argv, seconds(240),
                                {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("vs_mpi"), std::string::npos) << r.out;
  expect_clean_rows(json.path(), GetParam(), true);
}

// The same under mpirun with the MPI baseline timed in the turns: every row has it.
TEST(BenchUnderMpirunInterleaved, RowsAreCorrectAndHaveTheBaseline) {
  TempPath json;
  std::vector<std::string> argv = {TIDEGATE_MPIEXEC_PATH, "--allow-run-as-root", "-np", "3",
                                   "--oversubscribe",     "--bind-to",           "none"};
  for (const std::string& arg : interleaved_bench_args("fp16", json.path())) argv.push_back(arg);
  argv.insert(argv.end(), {"-I", "0", "--baseline", "mpi"});
  ProcessResult r = run_process(argv, seconds(240),
                                {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<std::string> rows = read_lines(json.path());
  ASSERT_EQ(rows.size(), 4u) << "2 sizes x (dense, fp16)";
  for (const std::string& row : rows) {
    SCOPED_TRACE(row);
    EXPECT_EQ(json_field(row, "wrong"), "0");
    EXPECT_FALSE(json_field(row, "baseline_time_us").empty());
  }
}

const BenchRun kMpiRuns[] = {
    {"allreduce", "float", "sum"},  {"reduce_scatter", "int32", "max"},
    {"allgather", "double", "sum"}, {"broadcast", "uint8", "sum"},
    {"alltoallv", "int64", "sum"},  {"allreduce", "half", "sum"},
};
INSTANTIATE_TEST_SUITE_P(Collectives, BenchUnderMpirun, ::testing::ValuesIn(kMpiRuns), name_of);
#endif

}  // namespace
}  // namespace tidegate::testing
