#include "runtime/router/routing/admission.h"

#include "absl/strings/str_cat.h"

namespace lockstep::router {

Admission::Ticket Admission::TryAdmit(int64_t places) {
  if (places < 1) places = 1;
  int64_t current = in_flight_.load();
  do {
    if (max_in_flight_ > 0 && current > max_in_flight_ - places) {
      refused_.fetch_add(1);
      return nullptr;
    }
  } while (!in_flight_.compare_exchange_weak(current, current + places));
  // A non-null pointer whose deleter gives the places back.
  return Ticket(this, [places](Admission* self) { self->in_flight_.fetch_sub(places); });
}

absl::Status Admission::RefusalStatus() const {
  return absl::ResourceExhaustedError(absl::StrCat("the router is at its limit of ",
                                                   max_in_flight_, " requests in flight (",
                                                   limit_name_, "); retry later"));
}

}  // namespace lockstep::router
