// The parameterised fixture every contract case derives from: one case is a transport, a
// world size and (for the cases that take one) a payload size. SetUp() creates the world or
// skips with the reason this machine cannot run it; the body then runs on every rank.
//
// Each *_test.cc instantiates its fixture for every transport this executable hosts with
// TIDEGATE_CONFORMANCE_INSTANTIATE, so test names carry the transport:
//   tcp/RoundTrip.RingExchange/P3_1023B
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "world.h"

namespace tidegate::conformance {

struct WorldCase {
  std::string transport;
  int ranks = 0;
  bool sized = false;  // whether `bytes` is part of the case
  size_t bytes = 0;
};

// The cases of `transport` in this executable: every world size, times `sizes` when given.
// Empty when the executable does not host the transport or the build lacks it.
std::vector<WorldCase> cases_for(const std::string& transport, const std::vector<size_t>& sizes);
std::string case_name(const ::testing::TestParamInfo<WorldCase>& info);
// How gtest prints a case ("tcp, 3 ranks, 1023 bytes") instead of its bytes.
void PrintTo(const WorldCase& c, std::ostream* out);

class WorldTest : public ::testing::TestWithParam<WorldCase> {
 protected:
  void SetUp() override;
  void TearDown() override { world_.reset(); }
  // Runs `body` on every rank of this case's world.
  void run(const RankBody& body) { world_->run(body); }

  std::unique_ptr<World> world_;
};

}  // namespace tidegate::conformance

// Instantiates `fixture` for every transport (cases_for() leaves out those not hosted here).
#define TIDEGATE_CONFORMANCE_INSTANTIATE(fixture, sizes)                                           \
  INSTANTIATE_TEST_SUITE_P(tcp, fixture, ::testing::ValuesIn(cases_for("tcp", sizes)), case_name); \
  INSTANTIATE_TEST_SUITE_P(ucx, fixture, ::testing::ValuesIn(cases_for("ucx", sizes)), case_name); \
  INSTANTIATE_TEST_SUITE_P(mpi, fixture, ::testing::ValuesIn(cases_for("mpi", sizes)), case_name); \
  INSTANTIATE_TEST_SUITE_P(nccl, fixture, ::testing::ValuesIn(cases_for("nccl", sizes)),           \
                           case_name);                                                             \
  GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(fixture)
