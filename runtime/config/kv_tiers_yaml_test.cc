// The `kv` section's tier fields: host_tier_bytes, disk_tier_path, disk_tier_bytes.
#include "absl/status/statusor.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;

TEST(KvTiersYamlTest, TierFieldsAreReadAndOffByDefault) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(
      "model: {name: m, path: p}\n"
      "instances:\n"
      "  - {name: a, role: aggregated, kv: {host_tier_bytes: 1048576,\n"
      "     disk_tier_path: /var/tmp/kv, disk_tier_bytes: 4194304}}\n"
      "  - {name: b, role: aggregated}\n",
      "");
  ASSERT_THAT(config, IsOk());
  const KvSettings& a = config->instances[0].kv;
  EXPECT_EQ(a.host_tier_bytes, 1048576);
  EXPECT_EQ(a.disk_tier_path, "/var/tmp/kv");
  EXPECT_EQ(a.disk_tier_bytes, 4194304);
  const KvSettings& b = config->instances[1].kv;
  EXPECT_EQ(b.host_tier_bytes, 0);
  EXPECT_TRUE(b.disk_tier_path.empty());
  EXPECT_EQ(b.disk_tier_bytes, 0);
}

TEST(KvTiersYamlTest, ANonNumericSizeIsAnError) {
  EXPECT_FALSE(ParseDeploymentConfig("model: {name: m, path: p}\n"
                                     "instances: [{name: a, role: aggregated,\n"
                                     "             kv: {host_tier_bytes: lots}}]\n",
                                     "")
                   .ok());
}

}  // namespace
}  // namespace lockstep::config
