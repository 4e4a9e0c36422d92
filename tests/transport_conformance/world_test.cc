#include "world_test.h"

#include <algorithm>
#include <ostream>

#include "api/transport_registry.h"

namespace tidegate::conformance {

std::vector<WorldCase> cases_for(const std::string& transport, const std::vector<size_t>& sizes) {
  const std::vector<std::string> hosted = world_transports();
  if (std::find(hosted.begin(), hosted.end(), transport) == hosted.end()) return {};
  if (find_transport(transport) == nullptr) return {};  // not in this build
  std::vector<WorldCase> cases;
  for (int ranks : world_sizes()) {
    if (sizes.empty()) cases.push_back({transport, ranks, false, 0});
    for (size_t bytes : sizes) cases.push_back({transport, ranks, true, bytes});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<WorldCase>& info) {
  const WorldCase& c = info.param;
  std::string name = "P" + std::to_string(c.ranks);
  if (c.sized) name += "_" + std::to_string(c.bytes) + "B";
  return name;
}

void PrintTo(const WorldCase& c, std::ostream* out) {
  *out << c.transport << ", " << c.ranks << " ranks";
  if (c.sized) *out << ", " << c.bytes << " bytes";
}

void WorldTest::SetUp() {
  const WorldCase& c = GetParam();
  std::string skip_reason;
  world_ = make_world(c.transport, c.ranks, &skip_reason);
  if (world_ == nullptr && !skip_reason.empty()) GTEST_SKIP() << skip_reason;
  ASSERT_NE(world_, nullptr) << c.transport << ": the world of " << c.ranks
                             << " ranks did not connect";
}

}  // namespace tidegate::conformance
