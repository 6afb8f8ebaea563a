#include "runtime/router/http/parse_threads.h"

#include <algorithm>
#include <utility>

namespace lockstep::router {

ParseThreads::ParseThreads(int n) {
  for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { Loop(); });
}

bool ParseThreads::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(work));
  return true;
}

void ParseThreads::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
}

void ParseThreads::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      // Work is short (bounded by the request size limits); an idle thread waits for
      // work or Stop, which ends the wait.
      mu_.Await(absl::Condition(
          +[](ParseThreads* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace lockstep::router
