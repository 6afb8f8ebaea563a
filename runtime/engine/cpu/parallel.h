// A small fixed pool of worker threads for data-parallel loops inside one forward.
//
// ParallelFor splits [0, n) into contiguous chunks and runs them on the pool and the
// calling thread; each chunk also gets the index (< num_threads()) of the thread that
// runs it, for per-thread scratch. Work items must be independent: each output is written by
// exactly one item, so results never depend on the thread count.
//
// Thread safety: ParallelFor is called by one thread at a time (the engine thread).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_PARALLEL_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_PARALLEL_H_

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::engine {

class ThreadPool {
 public:
  // `num_threads` >= 1 counts the calling thread: 1 runs everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end, thread) over disjoint ranges covering [0, n); returns when all
  // ran. No two concurrent calls share a `thread` index.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t, int)> fn);

 private:
  void WorkerLoop(int index);
  void RunChunk(int64_t chunk);

  std::vector<std::thread> workers_;
  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t job_ ABSL_GUARDED_BY(mu_) = 0;  // increments per ParallelFor
  int pending_ ABSL_GUARDED_BY(mu_) = 0;   // workers still running the current job
  // The current job (valid while pending_ > 0 or the caller runs its share).
  const absl::FunctionRef<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_ = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_PARALLEL_H_
