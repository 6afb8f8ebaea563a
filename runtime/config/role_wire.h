// An instance's role on the wire (proto/worker.proto InstanceRole) and in the
// configuration, both ways. Used by the router, the worker's registration and the
// benchmark's reports. Its own target (//runtime/config:role_wire): the rest of the
// configuration does not depend on the wire schema.
#ifndef LOCKSTEP_RUNTIME_CONFIG_ROLE_WIRE_H_
#define LOCKSTEP_RUNTIME_CONFIG_ROLE_WIRE_H_

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::config {

// InvalidArgument for an unspecified or unknown wire value.
absl::StatusOr<InstanceRole> RoleFromWire(v1::InstanceRole role);
v1::InstanceRole RoleToWire(InstanceRole role);

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_ROLE_WIRE_H_
