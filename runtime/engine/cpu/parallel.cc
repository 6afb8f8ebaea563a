#include "runtime/engine/cpu/parallel.h"

#include <algorithm>

#include "absl/time/time.h"

namespace lockstep::engine {

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::RunChunk(int64_t chunk) {
  const int64_t begin = n_ * chunk / chunks_;
  const int64_t end = n_ * (chunk + 1) / chunks_;
  if (begin < end) (*fn_)(begin, end, static_cast<int>(chunk));
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n, 0);
    return;
  }
  fn_ = &fn;
  n_ = n;
  chunks_ = std::min<int64_t>(n, num_threads());
  {
    absl::MutexLock lock(&mu_);
    pending_ = static_cast<int>(workers_.size());
    ++job_;
  }
  RunChunk(0);
  absl::MutexLock lock(&mu_);
  // Workers only compute; they finish without waiting on anything else.
  while (!mu_.AwaitWithTimeout(absl::Condition(
                                   +[](int* pending) { return *pending == 0; }, &pending_),
                               absl::Seconds(1))) {
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || job_ != seen; };
      while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1))) {
      }
      if (shutdown_) return;
      seen = job_;
    }
    if (index < chunks_) RunChunk(index);
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace lockstep::engine
