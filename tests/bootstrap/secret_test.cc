// Where the job secret comes from: TIDEGATE_SECRET, or a file that only its owner can read.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "base/auth.h"
#include "base/config.h"

namespace tidegate {
namespace {

class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "tidegate-secret-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (const std::string& file : files_) ::unlink(file.c_str());
    ::rmdir(dir_.c_str());
  }

  std::string write_file(const std::string& name, const std::string& contents, mode_t mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    files_.push_back(path);
    return path;
  }

  static Config config_with(const std::string& secret, const std::string& file) {
    Config config;
    EXPECT_TRUE(config.set("TIDEGATE_SECRET", secret).is_ok());
    EXPECT_TRUE(config.set("TIDEGATE_SECRET_FILE", file).is_ok());
    return config;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(SecretFile, OwnerOnlyFileIsAcceptedAndTrailingNewlineDropped) {
  const std::string path = write_file("ok", "file-secret\n", 0600);
  Secret secret;
  Status st = Secret::from_config(config_with("", path), true, &secret);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(secret.text(), "file-secret");
}

TEST_F(SecretFile, OwnerReadOnlyFileIsAccepted) {
  const std::string path = write_file("ro", "read-only-secret", 0400);
  Secret secret;
  ASSERT_TRUE(Secret::from_config(config_with("", path), true, &secret).is_ok());
  EXPECT_EQ(secret.text(), "read-only-secret");
}

TEST_F(SecretFile, GroupReadableFileIsRefusedWithChmodAdvice) {
  const std::string path = write_file("open", "file-secret\n", 0644);
  Secret secret = Secret::from_text("untouched");
  Status st = Secret::from_config(config_with("", path), true, &secret);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("chmod"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_EQ(secret.text(), "untouched");
}

TEST_F(SecretFile, MissingFileIsAConfigErrorNamingIt) {
  const std::string path = dir_ + "/does-not-exist";
  Secret secret;
  Status st = Secret::from_config(config_with("", path), true, &secret);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_CONFIG);
  EXPECT_NE(st.message().find("does-not-exist"), std::string::npos) << st.message();
}

TEST_F(SecretFile, EmptyFileIsRefused) {
  const std::string path = write_file("empty", "", 0600);
  Secret secret;
  EXPECT_EQ(Secret::from_config(config_with("", path), true, &secret).code(), TIDEGATE_ERR_CONFIG);
}

TEST_F(SecretFile, DirectoryIsRefused) {
  Secret secret;
  EXPECT_EQ(Secret::from_config(config_with("", dir_), true, &secret).code(), TIDEGATE_ERR_CONFIG);
}

TEST_F(SecretFile, InlineSecretWinsOverTheFile) {
  const std::string path = write_file("ok", "file-secret", 0600);
  Secret secret;
  ASSERT_TRUE(Secret::from_config(config_with("inline-secret", path), true, &secret).is_ok());
  EXPECT_EQ(secret.text(), "inline-secret");
}

TEST(Secret, NoneConfiguredIsAuthErrorOnlyWhenRequired) {
  Config config;
  ASSERT_TRUE(config.set("TIDEGATE_SECRET", "").is_ok());
  ASSERT_TRUE(config.set("TIDEGATE_SECRET_FILE", "").is_ok());
  Secret secret;
  Status st = Secret::from_config(config, true, &secret);
  EXPECT_EQ(st.code(), TIDEGATE_ERR_AUTH);
  EXPECT_NE(st.message().find("TIDEGATE_SECRET"), std::string::npos);
  secret = Secret::from_text("stale");
  ASSERT_TRUE(Secret::from_config(config, false, &secret).is_ok());
  EXPECT_TRUE(secret.empty());
}

TEST(Secret, RandomSecretsAreLongHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 8; ++i) {
    Secret secret;
    ASSERT_TRUE(Secret::random(&secret).is_ok());
    EXPECT_EQ(secret.text().size(), 64u);
    EXPECT_EQ(secret.text().find_first_not_of("0123456789abcdef"), std::string::npos);
    seen.insert(secret.text());
  }
  EXPECT_EQ(seen.size(), 8u);
}

}  // namespace
}  // namespace tidegate
