// tidegate-bench's timing loops without a communicator: run_timed_interleaved takes loops in
// turns (iteration i of every loop, each after its own barrier and preparation, before
// iteration i + 1 of any), keeps only the timed iterations, and stops at the first error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/tidegate_bench/timing.h"

namespace tidegate::bench {
namespace {

// A loop that writes what it does into a shared trace: "<name>b" for the barrier, "<name>p"
// for the preparation and "<name>" for the operation.
TimedLoop traced(const std::string& name, std::vector<std::string>* trace) {
  TimedLoop loop;
  loop.barrier = [=] {
    trace->push_back(name + "b");
    return Status::ok();
  };
  loop.prepare = [=] { trace->push_back(name + "p"); };
  loop.operation = [=] {
    trace->push_back(name);
    return Status::ok();
  };
  return loop;
}

TEST(BenchTiming, InterleavedLoopsRunInTurnsAndKeepOnlyTheTimedIterations) {
  std::vector<std::string> trace;
  const TimedLoop a = traced("a", &trace), b = traced("b", &trace), c = traced("c", &trace);
  std::vector<std::vector<double>> seconds;
  ASSERT_TRUE(run_timed_interleaved({&a, &b, &c}, /*warmup=*/1, /*iters=*/2, &seconds).is_ok());
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    for (const char* name : {"a", "b", "c"}) {
      expected.push_back(std::string(name) + "p");
      expected.push_back(std::string(name) + "b");
      expected.push_back(name);
    }
  }
  EXPECT_EQ(trace, expected);
  ASSERT_EQ(seconds.size(), 3u);
  for (const std::vector<double>& s : seconds) {
    EXPECT_EQ(s.size(), 2u);
    for (double t : s) EXPECT_GE(t, 0.0);
  }
  // One loop alone is run_timed.
  trace.clear();
  std::vector<double> alone;
  ASSERT_TRUE(run_timed(a, 2, 3, &alone).is_ok());
  EXPECT_EQ(alone.size(), 3u);
  EXPECT_EQ(trace.size(), 15u);
}

TEST(BenchTiming, TheFirstErrorStopsEveryLoop) {
  std::vector<std::string> trace;
  const TimedLoop a = traced("a", &trace);
  TimedLoop failing = traced("f", &trace);
  int calls = 0;
  failing.operation = [&] {
    return ++calls == 2 ? invalid_argument("second call fails") : Status::ok();
  };
  std::vector<std::vector<double>> seconds;
  const Status st = run_timed_interleaved({&a, &failing}, 0, 5, &seconds);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_INVALID_ARGUMENT) << st.to_string();
  EXPECT_EQ(calls, 2);
  // a ran twice (iterations 0 and 1), nothing after the failure.
  int a_ops = 0;
  for (const std::string& t : trace) a_ops += t == "a" ? 1 : 0;
  EXPECT_EQ(a_ops, 2);
  EXPECT_EQ(trace.back(), "fb");
}

}  // namespace
}  // namespace tidegate::bench
