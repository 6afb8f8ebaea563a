// The per-instance queue limit, router.max_queued_requests (docs/security.md §5): the
// most requests this router has outstanding at one instance. Routing (any policy)
// takes only the instances below it; when every healthy instance of the role a request
// needs is at it, the request is refused at once with QueueFullStatus (HTTP 429 with
// Retry-After, gRPC RESOURCE_EXHAUSTED) and counted as a refusal with reason
// kQueueFullReason: it never waits for a place.
//
//   if (!HasQueueRoom(entry.in_flight, max_queued)) continue;  // not a candidate
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_QUEUE_LIMIT_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_QUEUE_LIMIT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace lockstep::router {

// The refusal reason label (lockstep_router_refusals_total{reason}).
inline constexpr char kQueueFullReason[] = "max_queued_requests";

// True when an instance with `in_flight` requests outstanding from this router may take
// one more under `max_queued` (<= 0: no limit).
inline bool HasQueueRoom(int64_t in_flight, int64_t max_queued) {
  return max_queued <= 0 || in_flight < max_queued;
}

// What a request is refused with when every healthy instance of `role` ("context", ...)
// has `max_queued` requests outstanding (RESOURCE_EXHAUSTED, naming the field).
absl::Status QueueFullStatus(std::string_view role, int64_t max_queued);

// True for a status made by QueueFullStatus.
bool IsQueueFull(const absl::Status& status);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_QUEUE_LIMIT_H_
