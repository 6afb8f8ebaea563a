#include "runtime/router/front_door_limits.h"

#include <algorithm>

#include "fmt/format.h"

namespace lockstep::router {

FrontDoorLimits FrontDoorLimitsOf(const config::DeploymentConfig& config) {
  const config::RouterConfig& rc = config.router;
  FrontDoorLimits limits;
  for (const config::InstanceConfig& instance : config.instances) {
    limits.capacity += instance.world_size * int64_t{instance.executor.max_num_active_requests};
  }
  const int64_t grpc_bound = rc.grpc_max_threads - config::kRouterGrpcReservedThreads;
  if (rc.max_concurrent_requests > 0) {
    limits.max_concurrent_requests = rc.max_concurrent_requests;
    limits.concurrency_limit_name = "router.max_concurrent_requests";
  } else if (kConcurrencyFactor * limits.capacity > 0) {
    limits.max_concurrent_requests = kConcurrencyFactor * limits.capacity;
    limits.concurrency_limit_name = fmt::format(
        "{} × the deployment's capacity of {} (Σ world_size × max_num_active_requests), as "
        "router.max_concurrent_requests is 0",
        kConcurrencyFactor, limits.capacity);
  } else {
    limits.max_concurrent_requests = grpc_bound;
    limits.concurrency_limit_name =
        fmt::format("router.grpc_max_threads - {}, as router.max_concurrent_requests is 0",
                    config::kRouterGrpcReservedThreads);
  }
  limits.max_grpc_generate_calls = std::max<int64_t>(1, grpc_bound);
  limits.grpc_generate_limit_name = fmt::format(
      "router.grpc_max_threads - {} RouterService.Generate calls at once (each holds a gRPC "
      "thread)",
      config::kRouterGrpcReservedThreads);
  limits.max_connections = rc.max_connections > 0
                               ? rc.max_connections
                               : std::max(kMinConnections, kConnectionFactor * limits.capacity);
  return limits;
}

}  // namespace lockstep::router
