// `placement:` (deployment_config.h): parsing, defaults and the errors that name the field.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// Context DEP2 and generation DEP4 with `placement` (a YAML mapping body, indented by
// two spaces) appended.
std::string Yaml(const std::string& placement) {
  return absl::StrCat(R"(model: {name: m, path: /m}
instances:
  - {name: ctx0, role: context, world_size: 2}
  - {name: gen0, role: generation, world_size: 4}
)",
                      placement.empty() ? "" : absl::StrCat("placement:\n", placement));
}

TEST(PlacementTest, DefaultsWithoutTheSection) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(Yaml(""), "");
  ASSERT_THAT(config.status(), IsOk());
  EXPECT_EQ(config->placement.gpus_per_node, 0);
  EXPECT_EQ(config->placement.nodes_per_instance, 1);
  EXPECT_FALSE(config->placement.numa_bind);
  EXPECT_TRUE(config->placement.env.empty());
  EXPECT_FALSE(config->placement.compute_domain);
}

TEST(PlacementTest, ReadsEveryField) {
  absl::StatusOr<DeploymentConfig> config = ParseDeploymentConfig(Yaml(R"(  gpus_per_node: 4
  nodes_per_instance: 2
  numa_bind: true
  topology_key: nvidia.com/gpu.clique
  compute_domain: true
  env:
    NCCL_MNNVL_ENABLE: "1"
    NCCL_DEBUG: WARN
)"),
                                                                  "");
  ASSERT_THAT(config.status(), IsOk());
  const PlacementConfig& p = config->placement;
  EXPECT_EQ(p.gpus_per_node, 4);
  EXPECT_EQ(p.nodes_per_instance, 2);
  EXPECT_TRUE(p.numa_bind);
  EXPECT_EQ(p.topology_key, "nvidia.com/gpu.clique");
  EXPECT_TRUE(p.compute_domain);
  // File order is kept.
  EXPECT_THAT(p.env, ElementsAre(Pair("NCCL_MNNVL_ENABLE", "1"), Pair("NCCL_DEBUG", "WARN")));
}

struct BadPlacement {
  std::string yaml;     // the placement body
  std::string message;  // expected substring, starting with the field path
};

class BadPlacementTest : public ::testing::TestWithParam<BadPlacement> {};

TEST_P(BadPlacementTest, NamesTheField) {
  EXPECT_THAT(ParseDeploymentConfig(Yaml(GetParam().yaml), "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadPlacementTest,
    ::testing::Values(
        BadPlacement{"  gpus_per_node: -1\n", "placement.gpus_per_node: must be in [0, 64]"},
        BadPlacement{"  gpus_per_node: four\n", "placement.gpus_per_node: must be an integer"},
        BadPlacement{"  nodes_per_instance: 0\n",
                     "placement.nodes_per_instance: must be in [1, 64], got 0"},
        // ctx0 has 2 ranks: not a multiple of 4 nodes.
        BadPlacement{"  nodes_per_instance: 4\n",
                     "instances[0].world_size: must be a multiple of "
                     "placement.nodes_per_instance (4), got 2"},
        // gen0 puts 4 ranks on its one node.
        BadPlacement{"  gpus_per_node: 2\n",
                     "placement.gpus_per_node: must be >= the ranks per node of gen0"},
        BadPlacement{"  numa_bind: yes please\n", "placement.numa_bind: must be true or false"},
        BadPlacement{"  env: [A, B]\n", "placement.env: must be a mapping"},
        BadPlacement{"  env: {NCCL-DEBUG: WARN}\n", "placement.env.NCCL-DEBUG: must be a variable"},
        BadPlacement{"  env: {LOCKSTEP_RANK: '3'}\n", "placement.env.LOCKSTEP_RANK: LOCKSTEP_*"},
        BadPlacement{"  env: {A: [1]}\n", "placement.env.A: must be a string"},
        BadPlacement{"  topology_key: 'a b'\n", "placement.topology_key: must be a node label"},
        BadPlacement{"  compute_domain: true\n",
                     "placement.compute_domain: needs placement.gpus_per_node > 0"},
        BadPlacement{"  gpu_per_node: 4\n", "placement.gpu_per_node: unknown key"}));

}  // namespace
}  // namespace lockstep::config
