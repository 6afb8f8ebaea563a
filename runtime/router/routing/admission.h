// Router-wide admission (docs/security.md §5): at most `max_in_flight` places are held
// at once by generation requests through the router, HTTP and gRPC together; a request
// takes one place per choice (`n`). One more is refused at once (the caller answers
// HTTP 429 with Retry-After or gRPC RESOURCE_EXHAUSTED), never queued. A request holds
// its ticket until its response is over (a streaming one: until the stream ends).
//
//   Admission::Ticket ticket = admission.TryAdmit();
//   if (ticket == nullptr) return Refuse(admission.RefusalStatus());
//
// Thread safety: thread-safe; a ticket may be released on any thread.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_ADMISSION_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace lockstep::router {

class Admission {
 public:
  // Held while a request runs; releases its places when the last copy is destroyed.
  using Ticket = std::shared_ptr<void>;

  // `max_in_flight` <= 0: no limit (every request is admitted). `limit_name` names the
  // limit in refusals (the config field it comes from).
  explicit Admission(int64_t max_in_flight,
                     std::string limit_name = "router.max_concurrent_requests")
      : max_in_flight_(max_in_flight), limit_name_(std::move(limit_name)) {}

  // A ticket for `places` (>= 1) places, all or none; null when fewer are free.
  Ticket TryAdmit(int64_t places = 1);

  // What a refused request is told (RESOURCE_EXHAUSTED).
  absl::Status RefusalStatus() const;

  // The limit (<= 0: none): a request that needs more places can never be admitted.
  int64_t max_in_flight() const { return max_in_flight_; }
  const std::string& limit_name() const { return limit_name_; }
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t refused() const { return refused_.load(); }

 private:
  const int64_t max_in_flight_;
  const std::string limit_name_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> refused_{0};
};

// The refusal reason label of a request beyond the limit (core/router_metrics.h).
inline constexpr char kAdmissionReason[] = "max_concurrent_requests";

// Seconds a refused client is told to wait before retrying (HTTP Retry-After).
inline constexpr int kAdmissionRetryAfterSeconds = 1;

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_ADMISSION_H_
