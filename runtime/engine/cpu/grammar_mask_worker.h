// GrammarMaskWorker: computes a step's grammar masks on a thread of its own while the
// caller runs the target forward (BatchRunner), so that the masks of the first sampled
// position of every constrained sequence cost the step nothing when the forward takes
// longer than they do.
//
// One job at a time: Start hands over items [0, n) of a task; the worker thread claims
// them one by one, in order. Finish takes the job back: the caller computes every item
// the thread has not claimed itself, then waits, up to the deadline, for the one the
// thread is computing. The items are independent and each is computed exactly once,
// so what they produce does not depend on which thread computed it or when.
//
// Ownership: between Start and Finish the task's items belong to the worker (the caller
// must not touch them); after Finish returns OK they are the caller's again. After a
// missed deadline the item in progress still runs: the task must own (by shared_ptr)
// what it touches, and the caller must drop the items (BatchRunner fails the batch and
// forgets its states). The thread is started at the first Start.
//
// Thread safety: Start, Finish and the destructor are called by one thread (the
// engine's); completed_by_worker and AwaitWorkerIdle may be called from any thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_GRAMMAR_MASK_WORKER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_GRAMMAR_MASK_WORKER_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep::engine {

class GrammarMaskWorker {
 public:
  // Computes item i of a job. It must own (or share) everything it touches.
  using Task = std::function<void(int)>;

  // `deadline`: how long Finish waits for the item in progress.
  explicit GrammarMaskWorker(absl::Duration deadline = absl::Seconds(60));
  ~GrammarMaskWorker();  // joins the thread after its item in progress
  GrammarMaskWorker(const GrammarMaskWorker&) = delete;
  GrammarMaskWorker& operator=(const GrammarMaskWorker&) = delete;

  // Hands items [0, n) of `task` to the worker thread. The previous job must have been
  // finished. n == 0 starts nothing (and no thread).
  void Start(int n, Task task);
  // Takes the job back (see above). DeadlineExceeded when the item in progress did not
  // end within the deadline. OK without a job.
  absl::Status Finish();

  // Items of the current job the worker thread has computed (0 without a job).
  int completed_by_worker() const;
  // Waits until the worker thread has no unclaimed item of the current job and none in
  // progress; false at the deadline. For tests: a forward hook shows with it that the
  // masks were computed while the forward ran.
  bool AwaitWorkerIdle(absl::Duration timeout) const;

 private:
  struct Job {
    Task task;
    int n = 0;
    int next = 0;          // the first unclaimed item (guarded by mu_)
    int in_progress = 0;   // items the worker thread is computing (mu_)
    int by_worker = 0;     // items the worker thread completed (mu_)
  };

  void Loop();
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WorkerIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration deadline_;
  mutable absl::Mutex mu_;
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started at the first job
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_GRAMMAR_MASK_WORKER_H_
