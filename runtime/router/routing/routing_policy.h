// Routing policies: which of the candidate instances gets the next request.
//
//   round_robin: candidates in turn (by name order), one cursor per role.
//   least_load:  the fewest requests this router has in flight there; ties go to the
//                most free KV blocks last reported, then round robin.
//   kv_aware:    where the prompt's prefix is cached, against load (kv_aware_policy.h;
//                InstanceRegistry::Acquire picks it, not PickCandidate).
//
// Pure functions of their inputs (the cursor is passed in), tested exhaustively.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_ROUTING_POLICY_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_ROUTING_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/deployment_config.h"

namespace lockstep::router {

struct RoutingCandidate {
  std::string name;
  int64_t in_flight = 0;    // requests this router has outstanding there
  int64_t free_blocks = 0;  // last reported, target pool, all ranks
};

// The index in `candidates` (sorted by name, non-empty) to use; advances `*cursor`.
size_t PickCandidate(config::RoutingPolicy policy, const std::vector<RoutingCandidate>& candidates,
                     uint64_t* cursor);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_ROUTING_POLICY_H_
