#include "runtime/router/routing/routing_policy.h"

#include "common/check.h"

namespace lockstep::router {

size_t PickCandidate(config::RoutingPolicy policy, const std::vector<RoutingCandidate>& candidates,
                     uint64_t* cursor) {
  LOCKSTEP_CHECK(!candidates.empty()) << "no candidates to pick from";
  const size_t n = candidates.size();
  const size_t start = static_cast<size_t>((*cursor)++ % n);
  if (policy == config::RoutingPolicy::kRoundRobin) return start;
  // least_load: scan from the round-robin start so ties rotate.
  size_t best = start;
  for (size_t k = 1; k < n; ++k) {
    const size_t i = (start + k) % n;
    const RoutingCandidate& c = candidates[i];
    const RoutingCandidate& b = candidates[best];
    if (c.in_flight < b.in_flight ||
        (c.in_flight == b.in_flight && c.free_blocks > b.free_blocks)) {
      best = i;
    }
  }
  return best;
}

}  // namespace lockstep::router
