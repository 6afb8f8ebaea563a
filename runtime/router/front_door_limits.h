// The router's front-door limits when the deployment leaves them at 0, sized from what
// its instances can hold (docs/security.md §5):
//
//   capacity                = Σ over instances of world_size × executor.max_num_active_requests
//   max_concurrent_requests = kConcurrencyFactor × capacity
//   max_connections         = max(kMinConnections, kConnectionFactor × capacity)
//   max_grpc_generate_calls = router.grpc_max_threads − kRouterGrpcReservedThreads
//
// kConcurrencyFactor = 4: every active place of every rank, as many again waiting in
// the instance's queue, and twice that in flight at the router (requests being parsed,
// migrating, or in their context leg while their generation leg waits). An HTTP request
// holds no thread; a RouterService.Generate call holds a gRPC thread, so those calls
// have a bound of their own too, which keeps them from taking the threads that
// heartbeats and membership need. kConnectionFactor = 8: each admitted request's
// connection and as many idle keep-alive or refused clients. Either field set (> 0) is
// used as is.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_LIMITS_H_
#define LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_LIMITS_H_

#include <cstdint>
#include <string>

#include "runtime/config/deployment_config.h"

namespace lockstep::router {

inline constexpr int64_t kConcurrencyFactor = 4;
inline constexpr int64_t kConnectionFactor = 8;
inline constexpr int64_t kMinConnections = 1024;

struct FrontDoorLimits {
  int64_t capacity = 0;                 // Σ world_size × max_num_active_requests
  int64_t max_concurrent_requests = 0;  // > 0
  std::string concurrency_limit_name;   // what refusals name as the limit
  int64_t max_connections = 0;          // > 0
  int64_t max_grpc_generate_calls = 0;  // > 0; RouterService.Generate calls at once
  std::string grpc_generate_limit_name;
};

// The limits of a validated `config`.
FrontDoorLimits FrontDoorLimitsOf(const config::DeploymentConfig& config);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_LIMITS_H_
