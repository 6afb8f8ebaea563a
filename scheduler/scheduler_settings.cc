#include "scheduler/scheduler_settings.h"

namespace lockstep::sched {

const char* InstanceRoleName(InstanceRole role) {
  switch (role) {
    case InstanceRole::kAggregated:
      return "aggregated";
    case InstanceRole::kContext:
      return "context";
    case InstanceRole::kGeneration:
      return "generation";
  }
  return "?";
}

const char* DummyPolicyName(DummyPolicy policy) {
  return policy == DummyPolicy::kCompat ? "compat" : "reserved";
}

const char* CapacityPolicyName(CapacityPolicy policy) {
  return policy == CapacityPolicy::kGuaranteedNoEvict ? "guaranteed_no_evict" : "max_utilization";
}

}  // namespace lockstep::sched
