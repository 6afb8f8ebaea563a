// Polls a readiness check with a deadline without oversleeping: spins for `spin`, then
// yields the CPU between checks for kPollYieldFor (a decode step's forward or collective,
// a few milliseconds, ends within a check or two of being done), and only then sleeps
// with a doubling back-off up to kPollMaxBackoff (a long wait costs little CPU and
// overshoots by at most that, small against it). A sleep back-off from the start would
// overshoot a 3-10 ms forward by up to 1 ms, 10-30% of a small-batch decode step. Every
// wait of the CUDA code on the host has a deadline (NCCL kernels may spin forever when a
// peer is gone). Header-only, plain C++.
#ifndef LOCKSTEP_RUNTIME_CUDA_POLL_H_
#define LOCKSTEP_RUNTIME_CUDA_POLL_H_

#include <algorithm>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace lockstep::cuda {

// After the spin, how long Poll yields before it starts sleeping, and its longest sleep.
inline constexpr absl::Duration kPollYieldFor = absl::Milliseconds(50);
inline constexpr absl::Duration kPollMaxBackoff = absl::Milliseconds(1);

// The clock and the two ways of pausing Poll uses (tests pass fakes).
struct PollHooks {
  absl::Time (*now)() = &absl::Now;
  void (*yield)() = [] { std::this_thread::yield(); };
  void (*sleep)(absl::Duration) = [](absl::Duration d) { absl::SleepFor(d); };
};

// Calls `ready` (returning StatusOr<bool>) until it returns true (OK) or an error (that
// error), or the deadline passes (DeadlineExceeded: "<what> not complete").
template <typename Ready>
absl::Status Poll(Ready ready, absl::Time deadline, absl::Duration spin, absl::string_view what,
                  const PollHooks& hooks = {}) {
  const absl::Time spin_until = hooks.now() + spin;
  const absl::Time yield_until = spin_until + kPollYieldFor;
  absl::Duration backoff = absl::Microseconds(10);
  while (true) {
    absl::StatusOr<bool> done = ready();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    const absl::Time now = hooks.now();
    if (now >= deadline) return absl::DeadlineExceededError(absl::StrCat(what, " not complete"));
    if (now < spin_until) continue;
    if (now < yield_until) {
      hooks.yield();
      continue;
    }
    hooks.sleep(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, kPollMaxBackoff);
  }
}

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_POLL_H_
