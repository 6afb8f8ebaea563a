#include "runtime/security/configured_security.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::security {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

config::SecurityConfig Configured() {
  return {.cluster_token_file = "/config/token",
          .tls_cert_file = "/config/node.pem",
          .tls_key_file = "/config/node.key",
          .tls_ca_file = "/config/ca.pem",
          .tls_server_name = "config.internal"};
}

TEST(ChooseSecurityFilesTest, TheConfigWhereTheEnvironmentNamesNothing) {
  const ChosenSecurityFiles chosen = ChooseSecurityFiles(SecurityFiles(), Configured());
  EXPECT_EQ(chosen.files.cluster_token_file, "/config/token");
  EXPECT_EQ(chosen.token_source, "security.cluster_token_file");
  EXPECT_EQ(chosen.files.tls_cert_file, "/config/node.pem");
  EXPECT_EQ(chosen.files.tls_server_name, "config.internal");
  EXPECT_EQ(chosen.TlsSource("key"), "security.tls_key_file");
}

TEST(ChooseSecurityFilesTest, AVariableWinsOverItsFieldTheTlsFilesAsASet) {
  // Only the token from the environment: the TLS files stay the config's.
  ChosenSecurityFiles chosen =
      ChooseSecurityFiles({.cluster_token_file = "/env/token"}, Configured());
  EXPECT_EQ(chosen.files.cluster_token_file, "/env/token");
  EXPECT_EQ(chosen.token_source, "LOCKSTEP_CLUSTER_TOKEN_FILE");
  EXPECT_EQ(chosen.files.tls_ca_file, "/config/ca.pem");
  // One TLS variable replaces all four TLS fields (no mix of two certificates' files).
  chosen = ChooseSecurityFiles({.tls_cert_file = "/env/node.pem"}, Configured());
  EXPECT_EQ(chosen.files.cluster_token_file, "/config/token");
  EXPECT_EQ(chosen.files.tls_cert_file, "/env/node.pem");
  EXPECT_EQ(chosen.files.tls_key_file, "");
  EXPECT_EQ(chosen.files.tls_server_name, "");
  EXPECT_EQ(chosen.TlsSource("ca"), "LOCKSTEP_TLS_CA_FILE");
}

TEST(LoadChosenSecurityTest, ReadsTheTokenAndNamesTheFieldOfAnUnreadableFile) {
  const std::string token = WriteFile("configured_token", "tok-123\n");
  ChosenSecurityFiles chosen =
      ChooseSecurityFiles(SecurityFiles(), {.cluster_token_file = token});
  absl::StatusOr<ClusterSecurity> loaded = LoadChosenSecurity(chosen);
  ASSERT_THAT(loaded, IsOk());
  EXPECT_EQ(loaded->cluster_token, "tok-123");
  EXPECT_FALSE(loaded->tls());

  const std::string missing = ::testing::TempDir() + "/no_such_token";
  chosen = ChooseSecurityFiles(SecurityFiles(), {.cluster_token_file = missing});
  EXPECT_THAT(LoadChosenSecurity(chosen),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("security.cluster_token_file: "), HasSubstr(missing))));
  chosen = ChooseSecurityFiles({.cluster_token_file = missing}, {.cluster_token_file = token});
  EXPECT_THAT(LoadChosenSecurity(chosen),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("LOCKSTEP_CLUSTER_TOKEN_FILE: ")));
  const std::string empty = WriteFile("configured_empty", "\n");
  chosen = ChooseSecurityFiles(SecurityFiles(), {.cluster_token_file = empty});
  EXPECT_THAT(LoadChosenSecurity(chosen),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("security.cluster_token_file"), HasSubstr("empty"))));
  // A TLS file that cannot be read names its own field.
  config::SecurityConfig tls = Configured();
  tls.cluster_token_file = token;
  tls.tls_cert_file = WriteFile("configured_cert.pem", "not checked here");
  EXPECT_THAT(LoadChosenSecurity(ChooseSecurityFiles(SecurityFiles(), tls)),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("security.tls_key_file: "), HasSubstr("/config/node.key"))));
}

TEST(UseConfiguredClusterSecurityTest, SetsTheProcessSecurityOrFailsWithoutChangingIt) {
  ScopedClusterSecurity restore(ClusterSecurity{.cluster_token = "before"});
  ASSERT_EQ(std::getenv("LOCKSTEP_CLUSTER_TOKEN_FILE"), nullptr);
  const std::string token = WriteFile("configured_used", "from-config");
  LOCKSTEP_ASSERT_OK(UseConfiguredClusterSecurity({.cluster_token_file = token}));
  EXPECT_EQ(ProcessClusterSecurity().cluster_token, "from-config");
  EXPECT_THAT(UseConfiguredClusterSecurity({.cluster_token_file = token + ".missing"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("security.cluster_token_file")));
  EXPECT_EQ(ProcessClusterSecurity().cluster_token, "from-config");
  // The variable wins over the field.
  const std::string env_token = WriteFile("configured_env", "from-env");
  ASSERT_EQ(setenv("LOCKSTEP_CLUSTER_TOKEN_FILE", env_token.c_str(), 1), 0);
  const absl::Status used = UseConfiguredClusterSecurity({.cluster_token_file = token});
  unsetenv("LOCKSTEP_CLUSTER_TOKEN_FILE");
  LOCKSTEP_ASSERT_OK(used);
  EXPECT_EQ(ProcessClusterSecurity().cluster_token, "from-env");
}

TEST(EnsureConfiguredClusterTokenTest, WritesATokenOnlyWhenNoneIsNamed) {
  ScopedClusterSecurity restore(ClusterSecurity{});
  ASSERT_EQ(std::getenv("LOCKSTEP_CLUSTER_TOKEN_FILE"), nullptr);
  // The config names one: it is used, nothing is written, the environment stays unset.
  const std::string dir = ::testing::TempDir() + "/ensure_configured";
  ASSERT_EQ(mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true);
  const std::string token = WriteFile("ensure_configured_token", "named");
  absl::StatusOr<std::string> used = EnsureConfiguredClusterToken(dir, {.cluster_token_file = token});
  ASSERT_THAT(used, IsOk());
  EXPECT_EQ(*used, token);
  EXPECT_EQ(ProcessClusterSecurity().cluster_token, "named");
  EXPECT_EQ(std::getenv("LOCKSTEP_CLUSTER_TOKEN_FILE"), nullptr);
  // None named: a fresh 0600 token in `dir`, named in the environment for the children.
  used = EnsureConfiguredClusterToken(dir, {});
  const char* variable = std::getenv("LOCKSTEP_CLUSTER_TOKEN_FILE");
  const std::string named = variable == nullptr ? "" : variable;
  unsetenv("LOCKSTEP_CLUSTER_TOKEN_FILE");
  ASSERT_THAT(used, IsOk());
  EXPECT_EQ(*used, dir + "/cluster_token");
  EXPECT_EQ(named, *used);
  EXPECT_EQ(ProcessClusterSecurity().cluster_token.size(), 64u);
  struct stat st;
  ASSERT_EQ(stat(used->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace lockstep::security
