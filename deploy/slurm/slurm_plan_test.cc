#include "deploy/slurm/slurm_plan.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"

namespace lockstep::deploy {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kExample[] = "deploy/slurm/examples/gb300_disagg_ctx_dep4x1_gen_dep4x2.yaml";

// The error message of a failed plan; "" when it succeeded.
std::string ErrorOf(const absl::StatusOr<std::string>& plan) {
  if (plan.ok()) return "";
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(plan.status().message());
}

config::DeploymentConfig Example() {
  absl::StatusOr<config::DeploymentConfig> config = config::LoadDeploymentConfig(kExample);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

SlurmPlanOptions Options(std::vector<std::string> nodes) {
  return {.config_path = "/shared/gb300.yaml",
          .nodes = std::move(nodes),
          .run_dir = "/shared/run",
          .lockstep_binary = "/opt/lockstep/bin/lockstep"};
}

TEST(SlurmPlanTest, RouterOnTheFirstNodeAndOneStepPerInstance) {
  absl::StatusOr<std::string> plan = PlanSlurm(Example(), Options({"tray1", "tray2", "tray3"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string& s = *plan;
  EXPECT_THAT(s, HasSubstr("LOCKSTEP_RENDEZVOUS=\"$(lockstep_node_addr tray1):50051\""));
  EXPECT_THAT(s, HasSubstr("lockstep_step router srun ${LOCKSTEP_SRUN_ARGS:-} -N1 -n1 -w tray1 "
                           "--overlap --kill-on-bad-exit=1 --open-mode=append "
                           "--output=/shared/run/router.log /opt/lockstep/bin/lockstep router "
                           "--config /shared/gb300.yaml --address-file "
                           "/shared/run/router.address.json &"));
  EXPECT_THAT(s, HasSubstr("lockstep_wait_router /shared/run/router.address.json || exit 1"));
  for (const auto& [instance, node] :
       {std::pair{"ctx0", "tray1"}, std::pair{"gen0", "tray2"}, std::pair{"gen1", "tray3"}}) {
    EXPECT_THAT(s, HasSubstr(absl::StrCat("lockstep_step ", instance,
                                          " srun ${LOCKSTEP_SRUN_ARGS:-} -N1 -n4 -w ", node,
                                          " --overlap --kill-on-bad-exit=1")))
        << instance;
    EXPECT_THAT(s, HasSubstr(absl::StrCat("--output=/shared/run/", instance, ".rank%t.log")));
    EXPECT_THAT(s, HasSubstr(absl::StrCat("worker --config /shared/gb300.yaml --instance ",
                                          instance, " --rendezvous \"$LOCKSTEP_RENDEZVOUS\" &")));
  }
  // The restart loop, the placement environment and NUMA binding.
  EXPECT_THAT(s, HasSubstr("sleep \"$backoff\""));
  EXPECT_THAT(s, HasSubstr("backoff * 2 < 30 ? backoff * 2 : 30"));
  EXPECT_THAT(s, HasSubstr("export NCCL_DEBUG=WARN\n"));
  EXPECT_THAT(s, HasSubstr("export NCCL_CUMEM_ENABLE=1\n"));
  EXPECT_THAT(s, HasSubstr("bash -c 'exec numactl --membind=\"$(cat "
                           "/sys/devices/system/node/has_cpu)\" \"$@\"' numa-bind"));
  EXPECT_THAT(s, HasSubstr("\nwait\n"));
  // Every step presents the token the plan wrote to the run directory.
  EXPECT_THAT(s, HasSubstr("export LOCKSTEP_CLUSTER_TOKEN_FILE=\"${LOCKSTEP_CLUSTER_TOKEN_FILE:-"
                           "/shared/run/cluster_token}\"\n"));
  EXPECT_EQ(SlurmClusterTokenFile(Example(), Options({"tray1"})), "/shared/run/cluster_token");
}

TEST(SlurmPlanTest, UcxTransfersRaiseTheLockedMemoryLimitAndExportUcxVariables) {
  config::DeploymentConfig config = Example();
  const std::string ulimit = "ulimit -l unlimited 2>/dev/null || echo";
  absl::StatusOr<std::string> plan = PlanSlurm(config, Options({"tray1", "tray2", "tray3"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, Not(HasSubstr(ulimit)));  // tcp: nothing to pin
  for (config::InstanceConfig& instance : config.instances) {
    instance.transfer.transport = config::TransferTransport::kUcx;
  }
  config.placement.env.emplace_back("UCX_TLS", "rc,sm,self");
  config.placement.env.emplace_back("UCX_NET_DEVICES", "mlx5_0:1");
  plan = PlanSlurm(config, Options({"tray1", "tray2", "tray3"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr(ulimit));
  EXPECT_THAT(*plan, HasSubstr("export UCX_TLS=rc,sm,self\n"));
  EXPECT_THAT(*plan, HasSubstr("export UCX_NET_DEVICES=mlx5_0:1\n"));
  // Before the first step starts.
  EXPECT_LT(plan->find(ulimit), plan->find("lockstep_step router"));
  // Transports that stay within a node cannot carry transfers between the nodes.
  config.placement.env = {{"UCX_TLS", "shm,self"}};
  plan = PlanSlurm(config, Options({"tray1", "tray2", "tray3"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("placement.env.UCX_TLS: 'shm,self' names only transports within a node"));
}

TEST(SlurmPlanTest, ATokenFileNamedInTheConfigIsTheOneUsed) {
  config::DeploymentConfig config = Example();
  config.security.cluster_token_file = "/shared/secrets/cluster_token";
  absl::StatusOr<std::string> plan = PlanSlurm(config, Options({"t1", "t2", "t3"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The workers read it from the config; the plan generates and exports nothing.
  EXPECT_THAT(*plan, Not(HasSubstr("LOCKSTEP_CLUSTER_TOKEN_FILE")));
  EXPECT_EQ(SlurmClusterTokenFile(config, Options({"t1"})), "");
}

TEST(SlurmPlanTest, MultiNodeInstancesSpreadTheirRanks) {
  config::DeploymentConfig config = Example();
  config.placement.nodes_per_instance = 2;
  config.placement.gpus_per_node = 2;
  config.placement.numa_bind = false;
  ASSERT_TRUE(config.Validate().ok()) << config.Validate();
  absl::StatusOr<std::string> plan =
      PlanSlurm(config, Options({"a1", "a2", "a3", "a4", "a5", "a6", "a7"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("lockstep_step gen1 srun ${LOCKSTEP_SRUN_ARGS:-} -N2 -n4 "
                               "--ntasks-per-node=2 -w a5,a6 "));
  EXPECT_THAT(*plan, HasSubstr("# Unused node(s): a7."));
  EXPECT_THAT(*plan, Not(HasSubstr("numactl")));
}

TEST(SlurmPlanTest, AFixedRendezvousHostIsUsedAsIs) {
  config::DeploymentConfig config = Example();
  config.router.grpc_listen = "10.1.2.3:7000";
  absl::StatusOr<std::string> plan = PlanSlurm(config, Options({"t1", "t2", "t3"}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("LOCKSTEP_RENDEZVOUS=\"10.1.2.3:7000\""));
}

TEST(SlurmPlanTest, BadInputsNameTheFieldOrFlag) {
  config::DeploymentConfig config = Example();
  EXPECT_THAT(ErrorOf(PlanSlurm(config, Options({"t1", "t2"}))), HasSubstr("--nodes: the config needs 3 node(s)"));
  EXPECT_THAT(ErrorOf(PlanSlurm(config, Options({"t1", "t 2", "t3"}))), HasSubstr("--nodes: bad node name"));
  config.router.grpc_listen = "0.0.0.0:0";
  EXPECT_THAT(ErrorOf(PlanSlurm(config, Options({"t1", "t2", "t3"}))), HasSubstr("router.grpc_listen: needs a fixed port"));
  config.router.grpc_listen = "127.0.0.1:7000";
  EXPECT_THAT(ErrorOf(PlanSlurm(config, Options({"t1", "t2", "t3"}))), HasSubstr("router.grpc_listen: 127.0.0.1:7000 is a loopback address"));
  SlurmPlanOptions options = Options({"t1", "t2", "t3"});
  options.run_dir = "";
  EXPECT_THAT(ErrorOf(PlanSlurm(Example(), options)), HasSubstr("--run-dir"));
}

TEST(SlurmPlanTest, ShellQuoting) {
  EXPECT_EQ(ShellQuote("plain/path-1.yaml"), "plain/path-1.yaml");
  EXPECT_EQ(ShellQuote("two words"), "'two words'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

}  // namespace
}  // namespace lockstep::deploy
