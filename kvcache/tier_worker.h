// TierWorker: the KV tiers' background thread (kv_tiers.h). It runs queued jobs in
// order, each one block's copy-down (device block -> host bytes, through the device
// pool's copier) or one block's write into its slot of the disk tier's file
// (tier_file.h), and counts them. The owner
// may run a job that is still queued itself (Finish: a block about to be reused, an
// entry about to be read) or cancel it (an evicted disk entry's write).
//
//   TierWorker worker(copier);
//   auto job = std::make_shared<TierJob>();   // kCopyDown of block 7 into job->bytes
//   ...
//   worker.Enqueue(job);
//   worker.Finish(*job);                      // ran here, or waited for the thread
//   RETURN_IF_ERROR(worker.StatusOf(*job));
//
// Every wait has a deadline (kTierJobDeadline): a job that takes longer means the memory
// system or the disk is stuck, which no caller can recover from (a fatal check).
// Thread safety: every method may be called from any thread; a job's fields other than
// its state and result are the owner's until it is enqueued, then read-only. The
// destructor runs what is queued, then joins the thread.
#ifndef LOCKSTEP_KVCACHE_TIER_WORKER_H_
#define LOCKSTEP_KVCACHE_TIER_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "kvcache/block_copier.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {

inline constexpr absl::Duration kTierJobDeadline = absl::Seconds(60);

// One job: set kind and its inputs, then hand it to TierWorker::Enqueue.
struct TierJob {
  enum class Kind { kCopyDown, kDiskWrite };
  enum class State { kQueued, kRunning, kDone, kCancelled };
  Kind kind = Kind::kCopyDown;
  BlockId block{-1};                              // kCopyDown: the device block to read
  std::shared_ptr<std::vector<std::byte>> bytes;  // kCopyDown: filled; kDiskWrite: written
  TierBlockMeta meta;                             // kDiskWrite
  TierFile* file = nullptr;                       // kDiskWrite: not owned, outlives the job's run
  int64_t slot = -1;  // kDiskWrite: no other job writes it while this one may run
  // Guarded by the worker's mutex (read them through the worker).
  State state = State::kQueued;
  absl::Status status;
  int64_t ns = 0;  // how long it ran
};

class TierWorker {
 public:
  // `device`: the device pool's copier, for copy-downs (not owned; outlives the worker).
  explicit TierWorker(BlockCopier* device);
  ~TierWorker();
  TierWorker(const TierWorker&) = delete;
  TierWorker& operator=(const TierWorker&) = delete;

  void Enqueue(std::shared_ptr<TierJob> job);
  // Runs `job` on this thread if it is still queued, else waits for the worker thread
  // to finish it. Returns whether this thread ran it.
  bool Finish(TierJob& job);
  // Cancels `job` if it is still queued, else waits for it. Returns whether it was
  // cancelled.
  bool Cancel(TierJob& job);
  // Whether `job` finished or was cancelled.
  bool Done(const TierJob& job) const;
  absl::Status StatusOf(const TierJob& job) const;
  // Waits until nothing is queued or running.
  void Flush();
  // Finished jobs: copy-downs and their summed time, disk writes and failed writes.
  void Counters(int64_t* offloaded, int64_t* offload_ns, int64_t* writes,
                int64_t* write_errors) const;

 private:
  void WaitDone(TierJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a job this thread marked kRunning, without the lock; marks it done.
  void Run(TierJob& job);
  void Loop();

  BlockCopier* const device_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<TierJob>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  int64_t offloaded_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t offload_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t write_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts after the fields above exist
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_WORKER_H_
