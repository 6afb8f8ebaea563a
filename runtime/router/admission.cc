#include "runtime/router/admission.h"

#include "absl/strings/str_cat.h"

namespace lockstep::router {

Admission::Ticket Admission::TryAdmit() {
  int64_t current = in_flight_.load();
  do {
    if (max_in_flight_ > 0 && current >= max_in_flight_) {
      refused_.fetch_add(1);
      return nullptr;
    }
  } while (!in_flight_.compare_exchange_weak(current, current + 1));
  // A non-null pointer whose deleter gives the place back.
  return Ticket(this, [](Admission* self) { self->in_flight_.fetch_sub(1); });
}

absl::Status Admission::RefusalStatus() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the router is at its limit of ", max_in_flight_,
      " requests in flight (router.max_concurrent_requests); retry later"));
}

}  // namespace lockstep::router
