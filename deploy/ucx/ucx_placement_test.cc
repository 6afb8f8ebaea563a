#include "deploy/ucx/ucx_placement.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::deploy {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

config::DeploymentConfig WithUcx(std::vector<std::pair<std::string, std::string>> env) {
  config::DeploymentConfig config;
  config.instances.resize(2);
  config.instances[0].name = "ctx0";
  config.instances[1].name = "gen0";
  for (config::InstanceConfig& instance : config.instances) {
    instance.transfer.transport = config::TransferTransport::kUcx;
  }
  config.placement.env = std::move(env);
  return config;
}

constexpr UcxPlacement kSlurmNodes{.multi_node = true};
constexpr UcxPlacement kSlurmOneNode{.multi_node = false};
constexpr UcxPlacement kPods{.multi_node = true, .devices_from_rdma_resources = true};

TEST(UcxPlacementTest, SharedMemoryOnlyIsRefusedAcrossNodesAndFineOnOne) {
  const config::DeploymentConfig config = WithUcx({{"UCX_TLS", "shm,self"}});
  EXPECT_THAT(CheckUcxPlacement(config, kSlurmOneNode), IsEmpty());
  EXPECT_THAT(CheckUcxPlacement(config, kSlurmNodes),
              ElementsAre(AllOf(HasSubstr("placement.env.UCX_TLS: 'shm,self'"),
                                HasSubstr("only transports within a node (shm, self)"),
                                HasSubstr("several nodes"))));
  EXPECT_THAT(CheckUcxPlacement(WithUcx({{"UCX_TLS", "sm, cma ,self"}}), kPods), SizeIs(1));
}

TEST(UcxPlacementTest, TransportsBetweenNodesPass) {
  for (const char* tls : {"tcp,self", "rc,sm,self", "dc_mlx5,self", "all", "^shm", "TCP",
                          "sm,self,rc_verbs"}) {
    config::DeploymentConfig config = WithUcx({{"UCX_TLS", tls}});
    config.placement.rdma_resources = {{"rdma/ib", 1}};
    EXPECT_THAT(CheckUcxPlacement(config, kSlurmNodes), IsEmpty()) << tls;
    EXPECT_THAT(CheckUcxPlacement(config, kPods), IsEmpty()) << tls;
  }
  // UCX_TLS unset: UCX chooses.
  EXPECT_THAT(CheckUcxPlacement(WithUcx({}), kPods), IsEmpty());
}

TEST(UcxPlacementTest, RdmaTransportsNeedRdmaResourcesInThePodSpec) {
  config::DeploymentConfig config = WithUcx({{"UCX_TLS", "rc,sm,self"}});
  EXPECT_THAT(CheckUcxPlacement(config, kPods),
              ElementsAre(AllOf(HasSubstr("placement.env.UCX_TLS: 'rc,sm,self'"),
                                HasSubstr("RDMA transports (rc)"),
                                HasSubstr("placement.rdma_resources"))));
  EXPECT_THAT(CheckUcxPlacement(config, kSlurmNodes), IsEmpty());  // nodes have their HCAs
  config.placement.rdma_resources = {{"rdma/ib", 1}};
  EXPECT_THAT(CheckUcxPlacement(config, kPods), IsEmpty());
  EXPECT_THAT(CheckUcxPlacement(WithUcx({{"UCX_TLS", "tcp,self"}}), kPods), IsEmpty());
}

TEST(UcxPlacementTest, EmptyValuesAreNamed) {
  EXPECT_THAT(CheckUcxPlacement(WithUcx({{"UCX_TLS", " "}, {"UCX_NET_DEVICES", ""}}), kPods),
              ElementsAre(HasSubstr("placement.env.UCX_TLS: is empty"),
                          HasSubstr("placement.env.UCX_NET_DEVICES: is empty")));
}

TEST(UcxPlacementTest, NothingIsCheckedWithoutUcx) {
  config::DeploymentConfig config = WithUcx({{"UCX_TLS", "shm,self"}});
  for (config::InstanceConfig& instance : config.instances) {
    instance.transfer.transport = config::TransferTransport::kTcp;
  }
  EXPECT_THAT(CheckUcxPlacement(config, kPods), IsEmpty());
}

}  // namespace
}  // namespace lockstep::deploy
