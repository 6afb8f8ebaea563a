#include "runtime/router/front_door_limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::testing::HasSubstr;

// Two DEP4 instances with 768 active requests per rank (capacity 6,144).
config::DeploymentConfig Dep4x2() {
  config::DeploymentConfig config;
  for (const char* name : {"gen0", "gen1"}) {
    config::InstanceConfig instance;
    instance.name = name;
    instance.world_size = 4;
    instance.executor.max_num_active_requests = 768;
    config.instances.push_back(instance);
  }
  config.router.grpc_max_threads = 1 << 16;
  return config;
}

TEST(FrontDoorLimitsTest, UnsetLimitsAreSizedFromTheDeploymentsCapacity) {
  const FrontDoorLimits limits = FrontDoorLimitsOf(Dep4x2());
  EXPECT_EQ(limits.capacity, 2 * 4 * 768);
  EXPECT_EQ(limits.max_concurrent_requests, kConcurrencyFactor * 6144);
  EXPECT_THAT(limits.concurrency_limit_name, HasSubstr("capacity of 6144"));
  EXPECT_EQ(limits.max_connections, kConnectionFactor * 6144);
}

TEST(FrontDoorLimitsTest, ConfiguredLimitsAreKept) {
  config::DeploymentConfig config = Dep4x2();
  config.router.max_concurrent_requests = 100;
  config.router.max_connections = 300;
  const FrontDoorLimits limits = FrontDoorLimitsOf(config);
  EXPECT_EQ(limits.max_concurrent_requests, 100);
  EXPECT_EQ(limits.concurrency_limit_name, "router.max_concurrent_requests");
  EXPECT_EQ(limits.max_connections, 300);
}

// Each RouterService.Generate call holds a gRPC thread: those calls stay below the gRPC
// threads less the reserve, while the HTTP requests (no thread each) are not held to it;
// a small deployment still accepts kMinConnections.
TEST(FrontDoorLimitsTest, TheGrpcReserveAndTheConnectionFloorBound) {
  config::DeploymentConfig config = Dep4x2();
  config.router.grpc_max_threads = 1024;
  FrontDoorLimits limits = FrontDoorLimitsOf(config);
  EXPECT_EQ(limits.max_concurrent_requests, kConcurrencyFactor * 6144);
  EXPECT_EQ(limits.max_grpc_generate_calls, 1024 - config::kRouterGrpcReservedThreads);
  EXPECT_THAT(limits.grpc_generate_limit_name, HasSubstr("router.grpc_max_threads - 16"));

  config.instances.resize(1);
  config.instances[0].world_size = 1;
  config.instances[0].executor.max_num_active_requests = 16;
  limits = FrontDoorLimitsOf(config);
  EXPECT_EQ(limits.max_concurrent_requests, kConcurrencyFactor * 16);
  EXPECT_EQ(limits.max_connections, kMinConnections);
}

}  // namespace
}  // namespace lockstep::router
