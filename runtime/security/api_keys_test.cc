#include "runtime/security/api_keys.h"

#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::security {
namespace {

using ::lockstep::testing::StatusIs;

TEST(ApiKeysTest, NoKeysAllowsEveryone) {
  ApiKeys keys;
  EXPECT_FALSE(keys.required());
  EXPECT_TRUE(keys.AllowsAuthorization(""));
  EXPECT_TRUE(keys.Allows("anything"));
  EXPECT_FALSE(ApiKeys({""}).required());
}

TEST(ApiKeysTest, BearerHeaderMustNameAKey) {
  ApiKeys keys({"k1", "k2"});
  EXPECT_TRUE(keys.required());
  EXPECT_TRUE(keys.AllowsAuthorization("Bearer k1"));
  EXPECT_TRUE(keys.AllowsAuthorization("Bearer k2"));
  EXPECT_FALSE(keys.AllowsAuthorization("Bearer k3"));
  EXPECT_FALSE(keys.AllowsAuthorization("Bearer k1 "));
  EXPECT_FALSE(keys.AllowsAuthorization("k1"));
  EXPECT_FALSE(keys.AllowsAuthorization("Basic k1"));
  EXPECT_FALSE(keys.AllowsAuthorization(""));
  EXPECT_FALSE(keys.Allows(""));
}

// RFC 7235: the auth-scheme is case-insensitive, and one or more spaces separate it
// from the credentials.
TEST(ApiKeysTest, TheBearerSchemeIsMatchedInAnyCase) {
  ApiKeys keys({"k1"});
  EXPECT_TRUE(keys.AllowsAuthorization("bearer k1"));
  EXPECT_TRUE(keys.AllowsAuthorization("BEARER k1"));
  EXPECT_TRUE(keys.AllowsAuthorization("bEaReR k1"));
  EXPECT_TRUE(keys.AllowsAuthorization("Bearer   k1"));
  EXPECT_FALSE(keys.AllowsAuthorization("bearer k2"));
  EXPECT_FALSE(keys.AllowsAuthorization("bearerk1"));
  EXPECT_FALSE(keys.AllowsAuthorization("bearer"));
  EXPECT_FALSE(keys.AllowsAuthorization("bearer "));
  EXPECT_FALSE(keys.AllowsAuthorization("Bearer\tk1"));
  EXPECT_FALSE(keys.AllowsAuthorization("xbearer k1"));
}

TEST(ApiKeysTest, LoadsTheConfigKeyAndTheFile) {
  const std::string path = ::testing::TempDir() + "/api_keys";
  std::ofstream(path) << "# clients\nfile-key\n";
  absl::StatusOr<ApiKeys> keys_or = ApiKeys::Load("config-key", path);
  LOCKSTEP_ASSERT_OK(keys_or.status());
  ApiKeys keys = *keys_or;
  EXPECT_TRUE(keys.Allows("config-key"));
  EXPECT_TRUE(keys.Allows("file-key"));
  EXPECT_FALSE(keys.Allows("other"));
  EXPECT_THAT(ApiKeys::Load("", "/nonexistent/keys"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace lockstep::security
