// Polls a readiness check with a deadline: spins for `spin`, then sleeps with a doubling
// back-off up to 1 ms, so a wait for a short GPU operation costs microseconds and a
// long one little CPU. Every wait of the CUDA code on the host has a deadline (NCCL
// kernels may spin forever when a peer is gone). Header-only, plain C++.
#ifndef LOCKSTEP_RUNTIME_CUDA_POLL_H_
#define LOCKSTEP_RUNTIME_CUDA_POLL_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lockstep::cuda {

// Calls `ready` (returning StatusOr<bool>) until it returns true (OK) or an error (that
// error), or the deadline passes (DeadlineExceeded: "<what> not complete").
template <typename Ready>
absl::Status Poll(Ready ready, absl::Time deadline, absl::Duration spin, absl::string_view what) {
  constexpr absl::Duration kMaxBackoff = absl::Milliseconds(1);
  const absl::Time spin_until = absl::Now() + spin;
  absl::Duration backoff = absl::Microseconds(10);
  while (true) {
    absl::StatusOr<bool> done = ready();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError(absl::StrCat(what, " not complete"));
    if (now >= spin_until) {
      absl::SleepFor(std::min(backoff, deadline - now));
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_POLL_H_
