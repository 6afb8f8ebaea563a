#include "runtime/router/role_wire.h"

#include "fmt/format.h"

namespace lockstep::router {

absl::StatusOr<config::InstanceRole> RoleFromWire(v1::InstanceRole role) {
  switch (role) {
    case v1::INSTANCE_ROLE_AGGREGATED:
      return config::InstanceRole::kAggregated;
    case v1::INSTANCE_ROLE_CONTEXT:
      return config::InstanceRole::kContext;
    case v1::INSTANCE_ROLE_GENERATION:
      return config::InstanceRole::kGeneration;
    default:
      return absl::InvalidArgumentError(fmt::format(
          "role must be aggregated, context or generation, got {}", static_cast<int>(role)));
  }
}

v1::InstanceRole RoleToWire(config::InstanceRole role) {
  switch (role) {
    case config::InstanceRole::kAggregated:
      return v1::INSTANCE_ROLE_AGGREGATED;
    case config::InstanceRole::kContext:
      return v1::INSTANCE_ROLE_CONTEXT;
    case config::InstanceRole::kGeneration:
      return v1::INSTANCE_ROLE_GENERATION;
  }
  return v1::INSTANCE_ROLE_UNSPECIFIED;
}

}  // namespace lockstep::router
