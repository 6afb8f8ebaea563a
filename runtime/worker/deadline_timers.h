// DeadlineTimers: one thread that runs callbacks when their real-time deadlines pass, so
// that many waits (one per Generate stream) share a thread instead of each parking one.
//
//   DeadlineTimers timers;
//   DeadlineTimers::Id id = timers.Schedule(absl::Seconds(5), [] { ... });
//   timers.Cancel(id);  // true if it had not run yet: it never will
//
// Callbacks run on the timers' thread, one at a time, in deadline order; they must not
// block (they may Schedule or Cancel). Deadlines are real time (absl::Now()): a caller
// whose deadline is on an injected Clock converts it into the duration left.
//
// Thread safety: thread-safe. The destructor stops the thread; callbacks not yet run
// are dropped.
#ifndef LOCKSTEP_RUNTIME_WORKER_DEADLINE_TIMERS_H_
#define LOCKSTEP_RUNTIME_WORKER_DEADLINE_TIMERS_H_

#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep::worker {

class DeadlineTimers {
 public:
  using Id = uint64_t;

  DeadlineTimers();
  ~DeadlineTimers();
  DeadlineTimers(const DeadlineTimers&) = delete;
  DeadlineTimers& operator=(const DeadlineTimers&) = delete;

  // Runs `callback` once `after` has passed (at once if `after` <= 0). Ids start at 1.
  Id Schedule(absl::Duration after, absl::AnyInvocable<void()> callback)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes a callback that has not started; false if it ran, is running or is unknown
  // (Cancel never waits for a running callback).
  bool Cancel(Id id) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<absl::Time, Id>;
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<Key, absl::AnyInvocable<void()>> due_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Id, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // started last
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_DEADLINE_TIMERS_H_
