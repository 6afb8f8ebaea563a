// TierWorker: the KV tiers' background thread (kv_tiers.h). It runs queued jobs in
// order, each one block's copy-down (device block -> host bytes, through the device
// pool's copier), one block's write into its slot of the disk tier's file
// (tier_file.h), or the reads of one onboard's disk blocks, and counts them. The owner
// may run a copy-down or write that is still queued itself (Finish: a block about to be
// reused, an entry about to be read) or cancel it (an evicted disk entry's write). A
// read is queued ahead of everything (urgent) and only waited for (Await), never run
// by the owner: the file system may stall, and only a wait has a deadline.
//
//   TierWorker worker(copier);
//   auto job = std::make_shared<TierJob>();   // kCopyDown of block 7 into job->bytes
//   ...
//   RETURN_IF_ERROR(worker.Enqueue(job));
//   RETURN_IF_ERROR(worker.Finish(*job));     // ran here, or waited for the thread
//
// Every wait has a deadline (kTierJobDeadline unless given): a job that runs longer
// means the memory system or the disk (a stalled network file system) is stuck. The wait
// then ends with DEADLINE_EXCEEDED naming the job, and the worker is stuck for good
// (stuck()): what is queued is cancelled with that status, later jobs are refused, and
// no wait blocks again. Enqueue also finds a job running past the deadline when
// another already waits behind it. The stuck job keeps running on the thread: it owns
// what it reads and writes (its bytes and its file through shared pointers, the
// worker's state through the thread), so nothing the owner frees is touched. A
// copy-down also reads the device copier and the pool memory behind it: the worker's
// `device_owner` keeps them alive, held by the thread until it ends, so a copy-down
// still running after the destructor reads live memory, which is freed (on the thread)
// once it ended. A job that never ends keeps it for good: a bounded leak at shutdown,
// never a read of freed memory. (Without a `device_owner`, the copier, its memory and
// what frees it must outlive any copy-down still running after the worker.)
// Thread safety: every method may be called from any thread; a job's fields other than
// its state and result are the owner's until it is enqueued, then read-only. The
// destructor runs what is queued, then joins the thread; when that misses the deadline
// (or the worker is stuck) it logs, cancels what is queued and leaves the thread to end
// on its own.
#ifndef LOCKSTEP_KVCACHE_TIER_WORKER_H_
#define LOCKSTEP_KVCACHE_TIER_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "kvcache/block_copier.h"
#include "kvcache/tier_config.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {

// One job: set kind and its inputs, then hand it to TierWorker::Enqueue.
struct TierJob {
  enum class Kind { kCopyDown, kDiskWrite, kDiskRead };
  // kDiskRead: one block's slot, read into `bytes` (block-sized, the job's own: a read
  // still running after its wait gave up writes only there) and verified against `meta`.
  struct Read {
    int64_t slot = -1;
    TierBlockMeta meta;
    std::shared_ptr<std::vector<std::byte>> bytes;
    absl::Status status;  // the owner's to read once the job is done (kDone)
  };
  enum class State { kQueued, kRunning, kDone, kCancelled };
  Kind kind = Kind::kCopyDown;
  BlockId block{-1};                              // kCopyDown: the device block to read
  std::shared_ptr<std::vector<std::byte>> bytes;  // kCopyDown: filled; kDiskWrite: written
  TierBlockMeta meta;                             // kDiskWrite
  std::shared_ptr<TierFile> file;                 // kDiskWrite, kDiskRead
  int64_t slot = -1;  // kDiskWrite: no other job writes it while this one may run
  std::vector<Read> reads;  // kDiskRead, in order (the job's status is OK)
  // Guarded by the worker's mutex (read them through the worker).
  State state = State::kQueued;
  absl::Status status;
  int64_t ns = 0;  // how long it ran
};

// "copy-down of device block 7", "disk write of block <key> into slot 3 of <path>",
// "disk read of 4 blocks (the first, block <key>, from slot 3) of <path>" (a read job
// holds at least one block).
std::string DescribeTierJob(const TierJob& job);

class TierWorker {
 public:
  // `device`: the device pool's copier, for copy-downs (not owned). `device_owner` (may
  // be null): keeps `device` and the memory it reads alive until the worker and its
  // thread are done (see above). `deadline`: how long a wait may take.
  explicit TierWorker(BlockCopier* device, absl::Duration deadline = kTierJobDeadline,
                      std::shared_ptr<const void> device_owner = nullptr);
  ~TierWorker();
  TierWorker(const TierWorker&) = delete;
  TierWorker& operator=(const TierWorker&) = delete;

  // Queues `job`, last or (`urgent`) first. When the worker is stuck, or a job already
  // waits behind one running past the deadline (an urgent one is waited for: it counts
  // as waiting), which makes it stuck, cancels `job` instead and returns
  // DEADLINE_EXCEEDED.
  absl::Status Enqueue(std::shared_ptr<TierJob> job, bool urgent = false);
  // Runs `job` (a copy-down or write) on this thread if it is still queued, else waits for the
  // worker thread to finish it. Returns its status, or DEADLINE_EXCEEDED when it did not finish in
  // time (the worker is then stuck). `ran_here` (may be null): whether this thread ran it.
  absl::Status Finish(TierJob& job, bool* ran_here = nullptr);
  // Waits for the worker thread to run `job` (never runs it here): its status, or
  // DEADLINE_EXCEEDED as Finish.
  absl::Status Await(TierJob& job);
  // Cancels `job` if it is still queued (OK), else waits for it: its status, or
  // DEADLINE_EXCEEDED as Finish. `cancelled` (may be null): whether it was cancelled.
  absl::Status Cancel(TierJob& job, bool* cancelled = nullptr);
  // Whether `job` finished or was cancelled.
  bool Done(const TierJob& job) const;
  absl::Status StatusOf(const TierJob& job) const;
  // Waits until nothing is queued or running; DEADLINE_EXCEEDED (stuck) if that takes
  // longer than the deadline.
  absl::Status Flush();
  // OK, or the DEADLINE_EXCEEDED that made the worker stuck.
  absl::Status stuck() const;
  // Finished jobs: copy-downs and their summed time, disk writes and failed writes.
  void Counters(int64_t* offloaded, int64_t* offload_ns, int64_t* writes,
                int64_t* write_errors) const;

 private:
  struct State;  // shared with the thread, which may outlive the worker (see above)
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_WORKER_H_
