// Rank and size from tidegate's variables or from each launcher's, through the same path a
// communicator created from the environment takes (Config::from_environment).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/config.h"
#include "bootstrap/rank_discovery.h"

namespace tidegate {
namespace {

// Each test starts and ends with no rank variable in this process's environment (a test
// process's own, so nothing outside it is affected).
class RankDiscovery : public ::testing::Test {
 protected:
  void SetUp() override {
    names_ = Config::launcher_variable_names();
    names_.push_back("TIDEGATE_RANK");
    names_.push_back("TIDEGATE_SIZE");
    for (const std::string& name : names_) ::unsetenv(name.c_str());
  }
  void TearDown() override {
    for (const std::string& name : names_) ::unsetenv(name.c_str());
  }

  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

  Status discover() {
    Config config;
    TG_RETURN_IF_ERROR(Config::from_environment(&config));
    return discover_rank_and_size(config, &rank_, &size_, &source_);
  }

  int rank_ = -1;
  int size_ = -1;
  std::string source_;

 private:
  std::vector<std::string> names_;
};

TEST_F(RankDiscovery, TidegateVariables) {
  set("TIDEGATE_RANK", "2");
  set("TIDEGATE_SIZE", "5");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 2);
  EXPECT_EQ(size_, 5);
  EXPECT_NE(source_.find("TIDEGATE_RANK"), std::string::npos);
}

TEST_F(RankDiscovery, OpenMpi) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "4");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 3);
  EXPECT_EQ(size_, 4);
  EXPECT_NE(source_.find("Open MPI"), std::string::npos);
}

TEST_F(RankDiscovery, Pmi) {
  set("PMI_RANK", "0");
  set("PMI_SIZE", "1");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 0);
  EXPECT_EQ(size_, 1);
  EXPECT_NE(source_.find("PMI"), std::string::npos);
}

TEST_F(RankDiscovery, Slurm) {
  set("SLURM_PROCID", "7");
  set("SLURM_NTASKS", "8");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 7);
  EXPECT_EQ(size_, 8);
  EXPECT_NE(source_.find("Slurm"), std::string::npos);
}

TEST_F(RankDiscovery, TidegateVariablesWinOverTheLauncher) {
  set("TIDEGATE_RANK", "1");
  set("TIDEGATE_SIZE", "2");
  set("OMPI_COMM_WORLD_RANK", "5");
  set("OMPI_COMM_WORLD_SIZE", "6");
  set("SLURM_PROCID", "3");
  set("SLURM_NTASKS", "4");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 1);
  EXPECT_EQ(size_, 2);
}

TEST_F(RankDiscovery, OpenMpiWinsOverSlurmUnderMpirunInsideAnAllocation) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "1");
  ASSERT_TRUE(discover().is_ok());
  EXPECT_EQ(rank_, 1);
  EXPECT_EQ(size_, 2);
}

// Expects a CONFIG error whose message names `variable`, and no output written.
void expect_config_error(const Status& st, const std::string& variable, int rank, int size) {
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG) << st.to_string();
  EXPECT_NE(st.message().find(variable), std::string::npos) << st.message();
  EXPECT_EQ(rank, -1);
  EXPECT_EQ(size, -1);
}

TEST_F(RankDiscovery, NonIntegerValuesAreRefusedNamingTheVariable) {
  set("SLURM_PROCID", "1x");
  set("SLURM_NTASKS", "4");
  expect_config_error(discover(), "SLURM_PROCID", rank_, size_);
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", " 4");
  expect_config_error(discover(), "SLURM_NTASKS", rank_, size_);
  set("SLURM_NTASKS", "99999999999");
  expect_config_error(discover(), "SLURM_NTASKS", rank_, size_);
}

TEST_F(RankDiscovery, RankOutsideTheWorldIsRefused) {
  set("PMI_RANK", "4");
  set("PMI_SIZE", "4");
  expect_config_error(discover(), "PMI_RANK", rank_, size_);
  set("PMI_RANK", "-1");
  expect_config_error(discover(), "PMI_RANK", rank_, size_);
}

TEST_F(RankDiscovery, SizeBelowOneIsRefused) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "0");
  expect_config_error(discover(), "OMPI_COMM_WORLD_SIZE", rank_, size_);
}

TEST_F(RankDiscovery, HalfAPairIsRefusedNamingTheMissingHalf) {
  set("TIDEGATE_RANK", "0");
  expect_config_error(discover(), "TIDEGATE_SIZE", rank_, size_);
}

TEST_F(RankDiscovery, NothingSetIsAConfigErrorSayingWhatToSet) {
  expect_config_error(discover(), "TIDEGATE_RANK", rank_, size_);
}

}  // namespace
}  // namespace tidegate
