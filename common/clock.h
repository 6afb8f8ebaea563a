// Injected time. The logic of the executor, the transceiver's claims and the router reads
// a `Clock`, so simulations and tests replay it exactly with a `FakeClock`: step timing,
// arrival and first-token times, the drain deadline, KV receive deadlines and claim
// leases, the worker's Generate request timeout, heartbeat expiry, the router's request
// timeout, SSE idleness and latency metrics. Whatever waits in the kernel or on the
// network uses real time instead: collective timeouts, the engine step timeout,
// bootstrap and rendezvous, gRPC and TCP deadlines (a clock deadline is converted into a
// remaining duration where the two meet), worker health and stop deadlines, the
// leader's idle wait, the Generate stream timers, health polls, KV transfer waits, server
// shutdown graces and the launcher. docs/threading.md §6 lists each one.
//
// Thread safety: both implementations are thread-safe.
#ifndef LOCKSTEP_COMMON_CLOCK_H_
#define LOCKSTEP_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep {

class Clock {
 public:
  virtual ~Clock() = default;

  // Monotonic: never goes backwards.
  virtual absl::Time Now() const = 0;

  // Returns once `Now() >= deadline`. The system clock blocks the calling thread; a
  // FakeClock never blocks and jumps forward to `deadline` instead.
  virtual void SleepUntil(absl::Time deadline) = 0;
};

// The real, monotonic clock: wall time at construction plus a steady-clock offset.
class SystemClock : public Clock {
 public:
  SystemClock();
  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;

  // A process-wide instance, for `main` to inject.
  static SystemClock* Get();

 private:
  absl::Time base_;
  int64_t steady_base_ns_;
};

// Time that moves only when `Advance` or `SetTime` is called. Starts at the Unix
// epoch plus one day (so zero durations never look like "unset").
class FakeClock : public Clock {
 public:
  FakeClock();
  explicit FakeClock(absl::Time start);

  absl::Time Now() const override ABSL_LOCKS_EXCLUDED(mu_);
  // Never blocks: advances the clock to `deadline` if it is in the future.
  void SleepUntil(absl::Time deadline) override ABSL_LOCKS_EXCLUDED(mu_);

  void Advance(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves time forward to `t`; moving backwards is a bug (CHECK).
  void SetTime(absl::Time t) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CLOCK_H_
