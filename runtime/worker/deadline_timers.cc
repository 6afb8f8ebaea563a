#include "runtime/worker/deadline_timers.h"

#include <algorithm>
#include <vector>

#include "absl/time/clock.h"

namespace lockstep::worker {

DeadlineTimers::DeadlineTimers() : thread_([this] { Loop(); }) {}

DeadlineTimers::~DeadlineTimers() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    changed_.Signal();
  }
  thread_.join();
}

DeadlineTimers::Id DeadlineTimers::Schedule(absl::Duration after,
                                            absl::AnyInvocable<void()> callback) {
  const absl::Time at = absl::Now() + std::max(after, absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  const Id id = next_id_++;
  const bool earliest = due_.empty() || Key(at, id) < due_.begin()->first;
  due_.emplace(Key(at, id), std::move(callback));
  when_.emplace(id, at);
  if (earliest) changed_.Signal();  // the thread sleeps until the earliest deadline
  return id;
}

bool DeadlineTimers::Cancel(Id id) {
  absl::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  due_.erase(Key(it->second, id));
  when_.erase(it);
  return true;
}

int64_t DeadlineTimers::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(due_.size());
}

void DeadlineTimers::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (due_.empty()) {
      changed_.Wait(&mu_);
      continue;
    }
    const absl::Time first = due_.begin()->first.first;
    if (absl::Now() < first) {
      changed_.WaitWithDeadline(&mu_, first);
      continue;
    }
    // Everything due now runs outside the lock, so callbacks may Schedule and Cancel.
    std::vector<absl::AnyInvocable<void()>> run;
    const absl::Time now = absl::Now();
    while (!due_.empty() && due_.begin()->first.first <= now) {
      when_.erase(due_.begin()->first.second);
      run.push_back(std::move(due_.begin()->second));
      due_.erase(due_.begin());
    }
    mu_.Unlock();
    for (absl::AnyInvocable<void()>& callback : run) callback();
    run.clear();  // whatever the callbacks own is released outside the lock too
    mu_.Lock();
  }
}

}  // namespace lockstep::worker
