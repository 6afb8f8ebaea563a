#include "runtime/worker/worker_identity.h"

#include <map>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

Environment Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// ctx0 (DEP2), gen0 and gen1 (DEP4 each).
config::DeploymentConfig Config(int64_t nodes_per_instance = 1) {
  config::DeploymentConfig config;
  config.placement.nodes_per_instance = nodes_per_instance;
  config.instances.resize(3);
  config.instances[0].name = "ctx0";
  config.instances[0].role = config::InstanceRole::kContext;
  config.instances[0].world_size = 2;
  config.instances[1].name = "gen0";
  config.instances[1].role = config::InstanceRole::kGeneration;
  config.instances[1].world_size = 4;
  config.instances[2].name = "gen1";
  config.instances[2].role = config::InstanceRole::kGeneration;
  config.instances[2].world_size = 4;
  return config;
}

TEST(WorkerIdentityTest, FlagsComeFirst) {
  const config::DeploymentConfig config = Config();
  absl::StatusOr<WorkerIdentity> id = ResolveWorkerIdentity(
      {.instance = "gen1", .rank = 3, .world_size = 4, .device = 1}, config,
      Env({{"LOCKSTEP_INSTANCE", "ctx0"}, {"LOCKSTEP_RANK", "1"}, {"SLURM_PROCID", "2"}}));
  ASSERT_THAT(id.status(), IsOk());
  EXPECT_EQ(id->instance->name, "gen1");
  EXPECT_EQ(id->rank, 3);
  EXPECT_EQ(id->world_size, 4);
  EXPECT_EQ(id->local_device, 1);
  EXPECT_EQ(id->rank_source, "--rank");
}

TEST(WorkerIdentityTest, LockstepVariablesBeforeSlurm) {
  absl::StatusOr<WorkerIdentity> id =
      ResolveWorkerIdentity({}, Config(),
                            Env({{"LOCKSTEP_INSTANCE", "gen0"},
                                 {"LOCKSTEP_RANK", "1"},
                                 {"LOCKSTEP_DEVICE", "0"},
                                 {"SLURM_PROCID", "2"},
                                 {"SLURM_LOCALID", "2"}}));
  ASSERT_THAT(id.status(), IsOk());
  EXPECT_EQ(id->rank, 1);
  EXPECT_EQ(id->local_device, 0);
  EXPECT_EQ(id->rank_source, "LOCKSTEP_RANK");
}

TEST(WorkerIdentityTest, SlurmTaskVariables) {
  absl::StatusOr<WorkerIdentity> id = ResolveWorkerIdentity(
      {.instance = "gen0"}, Config(), Env({{"SLURM_PROCID", "2"}, {"SLURM_LOCALID", "2"}}));
  ASSERT_THAT(id.status(), IsOk());
  EXPECT_EQ(id->rank, 2);
  EXPECT_EQ(id->local_device, 2);
  EXPECT_EQ(id->world_size, 4);  // from the file
  EXPECT_EQ(id->rank_source, "SLURM_PROCID");
}

TEST(WorkerIdentityTest, DeviceDefaultsToTheRankOnItsNode) {
  // gen0 over 2 nodes: 2 ranks per node, so rank 3 is device 1 of the second node.
  absl::StatusOr<WorkerIdentity> id =
      ResolveWorkerIdentity({.instance = "gen0", .rank = 3}, Config(2), Env({}));
  ASSERT_THAT(id.status(), IsOk());
  EXPECT_EQ(id->local_device, 1);
}

TEST(WorkerIdentityTest, PodOrdinalPicksTheInstanceOfItsRole) {
  const config::DeploymentConfig config = Config();
  absl::StatusOr<const config::InstanceConfig*> instance = ResolveInstance(
      "", config, Env({{"LOCKSTEP_ROLE", "generation"}, {"POD_NAME", "lockstep-gen-1"}}));
  ASSERT_THAT(instance.status(), IsOk());
  EXPECT_EQ((*instance)->name, "gen1");
  // HOSTNAME when POD_NAME is not set.
  instance = ResolveInstance("", config,
                             Env({{"LOCKSTEP_ROLE", "context"}, {"HOSTNAME", "lockstep-ctx-0"}}));
  ASSERT_THAT(instance.status(), IsOk());
  EXPECT_EQ((*instance)->name, "ctx0");
}

TEST(WorkerIdentityTest, LeaderWorkerSetPodNames) {
  const config::DeploymentConfig config = Config(2);
  // A worker pod: "<set>-<group>-<worker>".
  absl::StatusOr<const config::InstanceConfig*> instance =
      ResolveInstance("", config,
                      Env({{"LOCKSTEP_ROLE", "generation"},
                           {"POD_NAME", "lockstep-gen-1-1"},
                           {"LWS_WORKER_INDEX", "1"}}));
  ASSERT_THAT(instance.status(), IsOk());
  EXPECT_EQ((*instance)->name, "gen1");
  // The leader: "<set>-<group>".
  instance = ResolveInstance("", config,
                             Env({{"LOCKSTEP_ROLE", "generation"},
                                  {"POD_NAME", "lockstep-gen-0"},
                                  {"LWS_WORKER_INDEX", "0"}}));
  ASSERT_THAT(instance.status(), IsOk());
  EXPECT_EQ((*instance)->name, "gen0");
  // An explicit index wins.
  instance = ResolveInstance("", config,
                             Env({{"LOCKSTEP_ROLE", "generation"},
                                  {"LOCKSTEP_INSTANCE_INDEX", "1"},
                                  {"POD_NAME", "whatever"}}));
  ASSERT_THAT(instance.status(), IsOk());
  EXPECT_EQ((*instance)->name, "gen1");
}

TEST(WorkerIdentityTest, StartRankOfANode) {
  const config::DeploymentConfig config = Config(2);
  const config::InstanceConfig& gen0 = config.instances[1];
  EXPECT_EQ(RanksPerNode(gen0, config.placement), 2);
  EXPECT_EQ(*ResolveStartRank(std::nullopt, gen0, config.placement, Env({})), 0);
  EXPECT_EQ(*ResolveStartRank(std::nullopt, gen0, config.placement,
                              Env({{"LWS_WORKER_INDEX", "1"}})),
            2);
  EXPECT_EQ(*ResolveStartRank(std::nullopt, gen0, config.placement,
                              Env({{"LOCKSTEP_START_RANK", "0"}, {"LWS_WORKER_INDEX", "1"}})),
            0);
  EXPECT_THAT(ResolveStartRank(1, gen0, config.placement, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--start-rank")));
  EXPECT_THAT(ResolveStartRank(std::nullopt, gen0, config.placement,
                               Env({{"LWS_WORKER_INDEX", "2"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("LWS_WORKER_INDEX")));
}

TEST(WorkerIdentityTest, ErrorsNameTheSource) {
  const config::DeploymentConfig config = Config();
  EXPECT_THAT(ResolveWorkerIdentity({}, config, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--instance")));
  EXPECT_THAT(ResolveWorkerIdentity({.instance = "gen9"}, config, Env({})),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("gen9")));
  EXPECT_THAT(ResolveWorkerIdentity({.instance = "gen0"}, config, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SLURM_PROCID")));
  EXPECT_THAT(ResolveWorkerIdentity({.instance = "gen0"}, config, Env({{"SLURM_PROCID", "x"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SLURM_PROCID must be")));
  EXPECT_THAT(ResolveWorkerIdentity({.instance = "gen0"}, config, Env({{"LOCKSTEP_RANK", "4"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("from LOCKSTEP_RANK")));
  EXPECT_THAT(ResolveInstance("", config,
                              Env({{"LOCKSTEP_ROLE", "generation"}, {"POD_NAME", "gen-2"}})),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("pod ordinal 2")));
  EXPECT_THAT(ResolveInstance("", config, Env({{"LOCKSTEP_ROLE", "decode"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("LOCKSTEP_ROLE must be")));
  // Aggregated single-rank instances need no rank.
  config::DeploymentConfig single = Config();
  single.instances[0].world_size = 1;
  EXPECT_THAT(ResolveWorkerIdentity({.instance = "ctx0"}, single, Env({})).status(), IsOk());
}

}  // namespace
}  // namespace lockstep::worker
