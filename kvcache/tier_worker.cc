#include "kvcache/tier_worker.h"

#include <chrono>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace lockstep::kv {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Finished(const TierJob& job) {
  return job.state == TierJob::State::kDone || job.state == TierJob::State::kCancelled;
}

}  // namespace

std::string DescribeTierJob(const TierJob& job) {
  if (job.kind == TierJob::Kind::kCopyDown) {
    return absl::StrCat("copy-down of device block ", job.block.value());
  }
  const std::string file = job.file != nullptr ? job.file->path() : "no file";
  if (job.kind == TierJob::Kind::kDiskRead) {
    return absl::StrCat("disk read of ", job.reads.size(),
                        job.reads.size() == 1 ? " block" : " blocks", " (the first, block ",
                        job.reads[0].meta.key, ", from slot ", job.reads[0].slot, ") of ", file);
  }
  return absl::StrCat("disk write of block ", job.meta.key, " into slot ", job.slot, " of ", file);
}

// Everything the thread touches but the jobs: owned by the worker and the thread
// together, so a stuck job may outlive the worker; the device copier and its memory
// through `device_owner` when given.
struct TierWorker::State {
  State(BlockCopier* device, absl::Duration deadline, std::shared_ptr<const void> device_owner)
      : device_owner(std::move(device_owner)), device(device), deadline(deadline) {}

  // Marks the worker stuck with `status` (the first one stays) and cancels what is
  // queued with it.
  void Stick(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!stuck.ok()) return;
    LOCKSTEP_LOG_ERROR("kv", "KV tier worker is stuck: {}; {} queued jobs cancelled",
                       status.ToString(), queue.size());
    stuck = std::move(status);
    for (const std::shared_ptr<TierJob>& job : queue) {
      if (job->state != TierJob::State::kQueued) continue;
      job->state = TierJob::State::kCancelled;
      job->status = absl::DeadlineExceededError(
          absl::StrCat(DescribeTierJob(*job), " cancelled: ", stuck.message()));
    }
    queue.clear();
  }
  // Whether a job already waits behind a running one that is past the deadline (then
  // sticks); `waiting`: a job about to be queued will be waited for.
  bool Overdue(bool waiting) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (running == nullptr || (queue.empty() && !waiting) ||
        absl::Now() - running_since < deadline) {
      return false;
    }
    Stick(absl::DeadlineExceededError(absl::StrCat("KV tier job (", DescribeTierJob(*running),
                                                   ") still running after ",
                                                   absl::FormatDuration(deadline))));
    return true;
  }
  // Waits for `job` to finish (on the thread), up to the deadline; its status, or
  // DEADLINE_EXCEEDED (then sticks). A stuck worker does not wait.
  absl::Status WaitDone(TierJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto done = [&job]() { return Finished(job); };
    if (stuck.ok() && !mu.AwaitWithDeadline(absl::Condition(&done), absl::Now() + deadline)) {
      Stick(absl::DeadlineExceededError(absl::StrCat("KV tier job (", DescribeTierJob(job),
                                                     ") did not finish in ",
                                                     absl::FormatDuration(deadline))));
      return stuck;
    }
    if (Finished(job)) return job.status;
    return absl::DeadlineExceededError(
        absl::StrCat(DescribeTierJob(job), " not finished: ", stuck.message()));
  }
  // Runs a job this thread marked kRunning, without the lock; marks it done and
  // returns its status.
  absl::Status Run(TierJob& job) ABSL_LOCKS_EXCLUDED(mu) {
    const int64_t start = NowNs();
    absl::Status status;
    if (job.kind == TierJob::Kind::kCopyDown) {
      const BlockSpan span{job.block, 0, device->block_bytes()};
      status = device->CopyOut({&span, 1}, absl::MakeSpan(*job.bytes));
    } else if (job.kind == TierJob::Kind::kDiskWrite) {
      status = job.file->Write(job.slot, job.meta, *job.bytes);
    } else {
      for (TierJob::Read& read : job.reads) {
        read.status = job.file->Read(read.slot, read.meta, absl::MakeSpan(*read.bytes));
      }
    }
    const int64_t ns = NowNs() - start;
    absl::MutexLock lock(&mu);
    job.status = std::move(status);
    job.ns = ns;
    job.state = TierJob::State::kDone;
    if (running == &job) running = nullptr;
    if (job.kind == TierJob::Kind::kCopyDown) {
      ++offloaded;
      offload_ns += ns;
    } else if (job.kind == TierJob::Kind::kDiskWrite) {
      ++writes;
      if (!job.status.ok()) ++write_errors;
    }
    return job.status;
  }
  void Loop() {
    while (true) {
      std::shared_ptr<TierJob> job;
      {
        absl::MutexLock lock(&mu);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return stop || !queue.empty(); };
        mu.Await(absl::Condition(&ready));
        if (queue.empty()) {  // stop, and nothing left
          exited = true;
          return;
        }
        job = std::move(queue.front());
        queue.pop_front();
        if (job->state != TierJob::State::kQueued) continue;  // run by the owner or cancelled
        job->state = TierJob::State::kRunning;
        running = job.get();
        running_since = absl::Now();
      }
      Run(*job).IgnoreError();  // kept in the job
    }
  }

  // Keeps `device` and what it reads alive while the state lives (the thread holds it).
  const std::shared_ptr<const void> device_owner;
  BlockCopier* const device;
  const absl::Duration deadline;
  mutable absl::Mutex mu;
  std::deque<std::shared_ptr<TierJob>> queue ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  bool exited ABSL_GUARDED_BY(mu) = false;  // the thread left Loop
  // The job on the thread (kept alive by it), from when it is taken until it is done.
  TierJob* running ABSL_GUARDED_BY(mu) = nullptr;
  absl::Time running_since ABSL_GUARDED_BY(mu);
  absl::Status stuck ABSL_GUARDED_BY(mu);
  int64_t offloaded ABSL_GUARDED_BY(mu) = 0;
  int64_t offload_ns ABSL_GUARDED_BY(mu) = 0;
  int64_t writes ABSL_GUARDED_BY(mu) = 0;
  int64_t write_errors ABSL_GUARDED_BY(mu) = 0;
};

TierWorker::TierWorker(BlockCopier* device, absl::Duration deadline,
                       std::shared_ptr<const void> device_owner)
    : state_(std::make_shared<State>(device, deadline, std::move(device_owner))),
      thread_([state = state_] { state->Loop(); }) {}

TierWorker::~TierWorker() {
  State& s = *state_;
  std::string left;  // why the thread is left to end on its own ("": joined)
  {
    absl::MutexLock lock(&s.mu);
    s.stop = true;
    auto exited = [&s]() ABSL_SHARED_LOCKS_REQUIRED(s.mu) { return s.exited; };
    // A stuck worker does not wait again: its queue is empty, its job may never end.
    if (!s.stuck.ok() ||
        !s.mu.AwaitWithDeadline(absl::Condition(&exited), absl::Now() + s.deadline)) {
      s.Stick(absl::DeadlineExceededError(absl::StrCat(
          "KV tier worker did not drain in ", absl::FormatDuration(s.deadline), " at shutdown")));
      if (!s.exited) left = std::string(s.stuck.message());
    }
  }
  if (left.empty()) {
    thread_.join();
    return;
  }
  LOCKSTEP_LOG_ERROR("kv", "KV tier worker: shutting down without its stuck job ({})", left);
  // The thread holds the state (with the device's owner) and its job: nothing it reads
  // is freed under it.
  thread_.detach();
}

absl::Status TierWorker::Enqueue(std::shared_ptr<TierJob> job, bool urgent) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  if (!s.stuck.ok() || s.Overdue(/*waiting=*/urgent)) {
    job->state = TierJob::State::kCancelled;
    job->status = absl::DeadlineExceededError(
        absl::StrCat(DescribeTierJob(*job), " refused: ", s.stuck.message()));
    return job->status;
  }
  if (urgent) {
    s.queue.push_front(std::move(job));
  } else {
    s.queue.push_back(std::move(job));
  }
  return absl::OkStatus();
}

absl::Status TierWorker::Finish(TierJob& job, bool* ran_here) {
  State& s = *state_;
  s.mu.Lock();
  const bool queued = job.state == TierJob::State::kQueued;
  if (ran_here != nullptr) *ran_here = queued;
  if (queued) {
    job.state = TierJob::State::kRunning;
    s.mu.Unlock();
    return s.Run(job);
  }
  absl::Status status = s.WaitDone(job);
  s.mu.Unlock();
  return status;
}

absl::Status TierWorker::Await(TierJob& job) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  return s.WaitDone(job);
}

absl::Status TierWorker::Cancel(TierJob& job, bool* cancelled) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  const bool queued = job.state == TierJob::State::kQueued;
  if (cancelled != nullptr) *cancelled = queued;
  if (queued) {
    job.state = TierJob::State::kCancelled;
    return absl::OkStatus();
  }
  return s.WaitDone(job);
}

bool TierWorker::Done(const TierJob& job) const {
  absl::MutexLock lock(&state_->mu);
  return Finished(job);
}

absl::Status TierWorker::StatusOf(const TierJob& job) const {
  absl::MutexLock lock(&state_->mu);
  return job.status;
}

absl::Status TierWorker::Flush() {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  auto idle = [&s]() ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    return s.queue.empty() && s.running == nullptr;
  };
  if (s.stuck.ok() && !s.mu.AwaitWithDeadline(absl::Condition(&idle), absl::Now() + s.deadline)) {
    s.Stick(absl::DeadlineExceededError(absl::StrCat(
        "KV tier worker did not drain in ", absl::FormatDuration(s.deadline),
        s.running != nullptr ? absl::StrCat(" (", DescribeTierJob(*s.running), ")") : "")));
  }
  return s.stuck;
}

absl::Status TierWorker::stuck() const {
  absl::MutexLock lock(&state_->mu);
  return state_->stuck;
}

void TierWorker::Counters(int64_t* offloaded, int64_t* offload_ns, int64_t* writes,
                          int64_t* write_errors) const {
  const State& s = *state_;
  absl::MutexLock lock(&s.mu);
  *offloaded = s.offloaded;
  *offload_ns = s.offload_ns;
  *writes = s.writes;
  *write_errors = s.write_errors;
}

}  // namespace lockstep::kv
