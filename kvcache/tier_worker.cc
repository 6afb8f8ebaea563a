#include "kvcache/tier_worker.h"

#include <chrono>
#include <utility>

#include "common/check.h"

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

TierWorker::TierWorker(BlockCopier* device) : device_(device), thread_([this] { Loop(); }) {}

TierWorker::~TierWorker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void TierWorker::Enqueue(std::shared_ptr<TierJob> job) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(job));
}

bool TierWorker::Finish(TierJob& job) {
  mu_.Lock();
  if (job.state == TierJob::State::kQueued) {
    job.state = TierJob::State::kRunning;
    mu_.Unlock();
    Run(job);
    return true;
  }
  WaitDone(job);
  mu_.Unlock();
  return false;
}

bool TierWorker::Cancel(TierJob& job) {
  absl::MutexLock lock(&mu_);
  if (job.state == TierJob::State::kQueued) {
    job.state = TierJob::State::kCancelled;
    return true;
  }
  WaitDone(job);
  return job.state == TierJob::State::kCancelled;
}

bool TierWorker::Done(const TierJob& job) const {
  absl::MutexLock lock(&mu_);
  return Finished(job);
}

absl::Status TierWorker::StatusOf(const TierJob& job) const {
  absl::MutexLock lock(&mu_);
  return job.status;
}

void TierWorker::Flush() {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + kTierJobDeadline;
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.empty() && !busy_; };
  LOCKSTEP_CHECK(mu_.AwaitWithDeadline(absl::Condition(&idle), deadline))
      << "KV tier worker did not drain in " << kTierJobDeadline;
}

void TierWorker::Counters(int64_t* offloaded, int64_t* offload_ns, int64_t* writes,
                          int64_t* write_errors) const {
  absl::MutexLock lock(&mu_);
  *offloaded = offloaded_;
  *offload_ns = offload_ns_;
  *writes = writes_;
  *write_errors = write_errors_;
}

void TierWorker::WaitDone(TierJob& job) {
  auto done = [&job]() { return Finished(job); };
  LOCKSTEP_CHECK(mu_.AwaitWithDeadline(absl::Condition(&done), absl::Now() + kTierJobDeadline))
      << "KV tier job did not finish in " << kTierJobDeadline;
}

void TierWorker::Run(TierJob& job) {
  const int64_t start = NowNs();
  absl::Status status;
  if (job.kind == TierJob::Kind::kCopyDown) {
    const BlockSpan span{job.block, 0, device_->block_bytes()};
    status = device_->CopyOut({&span, 1}, absl::MakeSpan(*job.bytes));
  } else {
    status = job.file->Write(job.slot, job.meta, *job.bytes);
  }
  const int64_t ns = NowNs() - start;
  absl::MutexLock lock(&mu_);
  job.status = std::move(status);
  job.ns = ns;
  job.state = TierJob::State::kDone;
  if (job.kind == TierJob::Kind::kCopyDown) {
    ++offloaded_;
    offload_ns_ += ns;
  } else {
    ++writes_;
    if (!job.status.ok()) ++write_errors_;
  }
}

void TierWorker::Loop() {
  while (true) {
    std::shared_ptr<TierJob> job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      if (job->state != TierJob::State::kQueued) continue;  // run by the owner or cancelled
      job->state = TierJob::State::kRunning;
      busy_ = true;
    }
    Run(*job);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace lockstep::kv
