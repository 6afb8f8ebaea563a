#include "runtime/launcher/launch_plan.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;

const PlanOptions kOptions = {
    .lockstep_binary = "/bin/lockstep", .config_path = "deploy.yaml", .run_dir = "run"};

TEST(LaunchPlanTest, AggregatedDep2) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::LoadDeploymentConfig("deploy/local/agg_dep2.yaml");
  ASSERT_THAT(config, IsOk());
  // The router binds port 0 itself and reports what it got: no port is picked here.
  const ProcessSpec router = RouterProcess(*config, kOptions);
  EXPECT_THAT(router.argv, ElementsAre("/bin/lockstep", "router", "--config", "deploy.yaml",
                                       "--http-listen", "127.0.0.1:0", "--grpc-listen",
                                       "127.0.0.1:0", "--address-file", "run/router.address.json"));
  EXPECT_EQ(router.log_path, "run/router.log");
  EXPECT_EQ(RouterAddressFile(kOptions), "run/router.address.json");
  // A restarted router listens where the first one bound: the workers and clients know it.
  EXPECT_THAT(RouterProcess(*config, kOptions, "127.0.0.1:8001", "127.0.0.1:8002").argv,
              ElementsAre("/bin/lockstep", "router", "--config", "deploy.yaml", "--http-listen",
                          "127.0.0.1:8001", "--grpc-listen", "127.0.0.1:8002", "--address-file",
                          "run/router.address.json"));
  const std::vector<ProcessSpec> workers = WorkerProcesses(*config, kOptions, "127.0.0.1:41001");
  ASSERT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers[1].name, "agg0/rank1");
  EXPECT_THAT(workers[1].argv,
              ElementsAre("/bin/lockstep", "worker", "--config", "deploy.yaml", "--role",
                          "aggregated", "--instance", "agg0", "--rank", "1", "--world-size", "2",
                          "--rendezvous", "127.0.0.1:41001", "--listen", "127.0.0.1:0"));
  EXPECT_EQ(workers[1].log_path, "run/agg0.rank1.log");
}

TEST(LaunchPlanTest, DisaggregatedStartsEveryRankOfBothInstances) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::LoadDeploymentConfig("deploy/local/disagg_ctx_dep2_gen_dep4.yaml");
  ASSERT_THAT(config, IsOk());
  const std::vector<ProcessSpec> workers = WorkerProcesses(*config, kOptions, "127.0.0.1:41001");
  std::vector<std::string> names;
  for (const ProcessSpec& spec : workers) names.push_back(spec.name);
  EXPECT_THAT(names, ElementsAre("ctx0/rank0", "ctx0/rank1", "gen0/rank0", "gen0/rank1",
                                 "gen0/rank2", "gen0/rank3"));
  EXPECT_EQ(workers[2].argv[5], "generation");
  EXPECT_EQ(workers[2].argv[11], "4");
}

TEST(LaunchPlanTest, ConfiguredAddressesAreKept) {
  config::DeploymentConfig config;
  config.router.http_listen = "0.0.0.0:8000";
  config.router.grpc_listen = "127.0.0.1:0";
  config::InstanceConfig instance;
  instance.name = "agg0";
  instance.world_size = 2;
  instance.leader_address = "127.0.0.1:7000";
  config.instances = {instance};
  EXPECT_EQ(RouterProcess(config, kOptions).argv[5], "0.0.0.0:8000");
  EXPECT_EQ(RouterProcess(config, kOptions).argv[7], "127.0.0.1:0");
  const std::vector<ProcessSpec> workers = WorkerProcesses(config, kOptions, "127.0.0.1:41001");
  EXPECT_EQ(workers[0].argv.back(), "127.0.0.1:7000");
  EXPECT_EQ(workers[1].argv.back(), "127.0.0.1:0");
}

}  // namespace
}  // namespace lockstep::launcher
