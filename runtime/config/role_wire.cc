#include "runtime/config/role_wire.h"

#include "fmt/format.h"

namespace lockstep::config {

absl::StatusOr<InstanceRole> RoleFromWire(v1::InstanceRole role) {
  switch (role) {
    case v1::INSTANCE_ROLE_AGGREGATED:
      return InstanceRole::kAggregated;
    case v1::INSTANCE_ROLE_CONTEXT:
      return InstanceRole::kContext;
    case v1::INSTANCE_ROLE_GENERATION:
      return InstanceRole::kGeneration;
    default:
      return absl::InvalidArgumentError(fmt::format(
          "role must be aggregated, context or generation, got {}", static_cast<int>(role)));
  }
}

v1::InstanceRole RoleToWire(InstanceRole role) {
  switch (role) {
    case InstanceRole::kAggregated:
      return v1::INSTANCE_ROLE_AGGREGATED;
    case InstanceRole::kContext:
      return v1::INSTANCE_ROLE_CONTEXT;
    case InstanceRole::kGeneration:
      return v1::INSTANCE_ROLE_GENERATION;
  }
  return v1::INSTANCE_ROLE_UNSPECIFIED;
}

}  // namespace lockstep::config
