#include "runtime/launcher/launch_plan.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;

PlanOptions Options() {
  auto next = std::make_shared<int>(20000);
  return {.lockstep_binary = "/bin/lockstep",
          .config_path = "deploy.yaml",
          .run_dir = "run",
          .pick_port = [next]() -> absl::StatusOr<int> { return (*next)++; }};
}

TEST(LaunchPlanTest, AggregatedDep2) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  absl::StatusOr<LaunchPlan> plan = BuildLaunchPlan(*config, Options());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->router_http, "127.0.0.1:20000");
  EXPECT_EQ(plan->router_grpc, "127.0.0.1:20001");
  EXPECT_THAT(plan->router.argv,
              ElementsAre("/bin/lockstep", "router", "--config", "deploy.yaml", "--http-listen",
                          "127.0.0.1:20000", "--grpc-listen", "127.0.0.1:20001"));
  EXPECT_EQ(plan->router.log_path, "run/router.log");
  ASSERT_EQ(plan->workers.size(), 2u);
  EXPECT_EQ(plan->workers[1].name, "agg0/rank1");
  EXPECT_THAT(plan->workers[1].argv,
              ElementsAre("/bin/lockstep", "worker", "--config", "deploy.yaml", "--role",
                          "aggregated", "--instance", "agg0", "--rank", "1", "--world-size", "2",
                          "--rendezvous", "127.0.0.1:20001", "--listen", "127.0.0.1:20003"));
  EXPECT_EQ(plan->workers[1].log_path, "run/agg0.rank1.log");
}

TEST(LaunchPlanTest, DisaggregatedStartsEveryRankOfBothInstances) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::LoadDeploymentConfig("deploy/local/disagg_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(config, IsOk());
  absl::StatusOr<LaunchPlan> plan = BuildLaunchPlan(*config, Options());
  ASSERT_THAT(plan, IsOk());
  std::vector<std::string> names;
  for (const ProcessSpec& spec : plan->workers) names.push_back(spec.name);
  EXPECT_THAT(names, ElementsAre("ctx0/rank0", "ctx0/rank1", "gen0/rank0", "gen0/rank1",
                                 "gen0/rank2", "gen0/rank3"));
  EXPECT_EQ(plan->workers[2].argv[5], "generation");
  EXPECT_EQ(plan->workers[2].argv[11], "4");
}

TEST(LaunchPlanTest, FixedPortsAreKept) {
  config::DeploymentConfig config;
  config.router.http_listen = "0.0.0.0:8000";
  config.router.grpc_listen = "127.0.0.1:0";
  config::InstanceConfig instance;
  instance.name = "agg0";
  instance.world_size = 1;
  instance.leader_address = "127.0.0.1:7000";
  config.instances = {instance};
  absl::StatusOr<LaunchPlan> plan = BuildLaunchPlan(config, Options());
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->router_http, "0.0.0.0:8000");
  EXPECT_EQ(plan->router_grpc, "127.0.0.1:20000");
  EXPECT_EQ(plan->workers[0].argv.back(), "127.0.0.1:7000");
}

}  // namespace
}  // namespace lockstep::launcher
