#include "runtime/transfer/event_queue.h"

#include <utility>

namespace lockstep::transfer {

void EventQueue::Push(TransferEvent event) {
  absl::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

std::vector<TransferEvent> EventQueue::Drain() {
  absl::MutexLock lock(&mu_);
  std::vector<TransferEvent> out;
  out.swap(events_);
  return out;
}

bool EventQueue::WaitNonEmpty(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto non_empty = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&non_empty), timeout);
}

size_t EventQueue::size() const {
  absl::MutexLock lock(&mu_);
  return events_.size();
}

}  // namespace lockstep::transfer
