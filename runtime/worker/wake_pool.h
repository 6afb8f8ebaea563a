// WakePool: a few threads that run short tasks in FIFO order, so that a thread that
// must not wait (the executor's, pushing responses) hands work off in O(1): the
// Generate streams start their writes here, off the executor thread.
//
// Thread safety: thread-safe. The destructor runs what is queued, then joins.
#ifndef LOCKSTEP_RUNTIME_WORKER_WAKE_POOL_H_
#define LOCKSTEP_RUNTIME_WORKER_WAKE_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::worker {

class WakePool {
 public:
  explicit WakePool(int threads);
  ~WakePool();
  WakePool(const WakePool&) = delete;
  WakePool& operator=(const WakePool&) = delete;

  // Queues `task`; it must not block.
  void Run(absl::AnyInvocable<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WAKE_POOL_H_
