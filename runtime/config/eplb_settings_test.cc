// The `eplb:` block: YAML parsing and validation with errors that name the field.
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<DeploymentConfig> Parse(const std::string& instance_fields) {
  return ParseDeploymentConfig("model: {name: tiny-moe, path: /m}\ninstances:\n"
                               "  - {name: agg0, role: aggregated, " +
                                   instance_fields + "}\n",
                               "");
}

absl::Status Validated(const std::string& instance_fields) {
  absl::StatusOr<DeploymentConfig> config = Parse(instance_fields);
  if (!config.ok()) return config.status();
  return config->Validate();
}

TEST(EplbSettingsTest, ParsesTheBlock) {
  absl::StatusOr<DeploymentConfig> config = Parse(
      "world_size: 4, eplb: {expert_placement: p.txt, load_window: 64, load_dump: loads.txt, "
      "rebalance_windows: 8, redundant_slots: 1}");
  ASSERT_THAT(config, IsOk());
  ASSERT_THAT(config->Validate(), IsOk());
  const EplbSettings& eplb = config->instances[0].eplb;
  EXPECT_EQ(eplb.expert_placement, "p.txt");
  EXPECT_EQ(eplb.load_window, 64);
  EXPECT_EQ(eplb.load_dump, "loads.txt");
  EXPECT_EQ(eplb.rebalance_windows, 8);
  EXPECT_EQ(eplb.redundant_slots, 1);
}

TEST(EplbSettingsTest, DefaultsMeasureNothing) {
  absl::StatusOr<DeploymentConfig> config = Parse("world_size: 2");
  ASSERT_THAT(config, IsOk());
  EXPECT_TRUE(config->instances[0].eplb.expert_placement.empty());
  EXPECT_EQ(config->instances[0].eplb.load_window, 0);
}

TEST(EplbSettingsTest, ErrorsNameTheField) {
  EXPECT_THAT(Validated("eplb: {load_window: -1}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].eplb.load_window")));
  EXPECT_THAT(Validated("eplb: {load_dump: x.txt}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].eplb.load_dump: needs load_window > 0")));
  EXPECT_THAT(Validated("engine: fake, eplb: {load_window: 8}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs engine: cpu")));
  EXPECT_THAT(Validated("eplb: {rebalance_windows: 4}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].eplb.rebalance_windows: needs load_window > 0")));
  EXPECT_THAT(Validated("eplb: {load_window: 8, rebalance_windows: 4, redundant_slots: 65}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].eplb.redundant_slots")));
  EXPECT_THAT(Validated("eplb: {placement: p.txt}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("placement")));
}

}  // namespace
}  // namespace lockstep::config
