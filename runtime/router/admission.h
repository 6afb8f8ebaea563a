// Router-wide admission (docs/security.md §5): at most `max_in_flight` generation
// requests run through the router at once, HTTP and gRPC together; one more is refused
// at once (the caller answers HTTP 429 with Retry-After or gRPC RESOURCE_EXHAUSTED),
// never queued. A request holds its ticket until its response is over (a streaming
// one: until the stream ends).
//
//   Admission::Ticket ticket = admission.TryAdmit();
//   if (ticket == nullptr) return Refuse(admission.RefusalStatus());
//
// Thread safety: thread-safe; a ticket may be released on any thread.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ADMISSION_H_
#define LOCKSTEP_RUNTIME_ROUTER_ADMISSION_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"

namespace lockstep::router {

class Admission {
 public:
  // Held while a request runs; releases its place when the last copy is destroyed.
  using Ticket = std::shared_ptr<void>;

  // `max_in_flight` <= 0: no limit (every request is admitted).
  explicit Admission(int64_t max_in_flight) : max_in_flight_(max_in_flight) {}

  // A ticket, or null when `max_in_flight` requests hold one already.
  Ticket TryAdmit();

  // What a refused request is told (RESOURCE_EXHAUSTED).
  absl::Status RefusalStatus() const;

  int64_t in_flight() const { return in_flight_.load(); }
  int64_t refused() const { return refused_.load(); }

 private:
  const int64_t max_in_flight_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> refused_{0};
};

// The refusal reason label of a request beyond the limit (router_metrics.h).
inline constexpr char kAdmissionReason[] = "max_concurrent_requests";

// Seconds a refused client is told to wait before retrying (HTTP Retry-After).
inline constexpr int kAdmissionRetryAfterSeconds = 1;

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ADMISSION_H_
