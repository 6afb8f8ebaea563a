// An instance's role on the wire (proto/worker.proto InstanceRole) and in the
// configuration, both ways. Used by the router, the worker's registration and the
// benchmark's reports.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROLE_WIRE_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROLE_WIRE_H_

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::router {

// InvalidArgument for an unspecified or unknown wire value.
absl::StatusOr<config::InstanceRole> RoleFromWire(v1::InstanceRole role);
v1::InstanceRole RoleToWire(config::InstanceRole role);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROLE_WIRE_H_
