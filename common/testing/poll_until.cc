#include "common/testing/poll_until.h"

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace lockstep::testing {

bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Mutex mu;
  absl::CondVar never;
  absl::MutexLock lock(&mu);
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    never.WaitWithTimeout(&mu, interval);
  }
  return true;
}

}  // namespace lockstep::testing
