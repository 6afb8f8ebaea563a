#include "runtime/engine/cpu/grammar_mask_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {

GrammarMaskWorker::GrammarMaskWorker(absl::Duration deadline) : deadline_(deadline) {}

GrammarMaskWorker::~GrammarMaskWorker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void GrammarMaskWorker::Start(int n, Task task) {
  if (n <= 0) return;
  auto job = std::make_shared<Job>();
  job->task = std::move(task);
  job->n = n;
  absl::MutexLock lock(&mu_);
  job_ = std::move(job);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void GrammarMaskWorker::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &GrammarMaskWorker::HasWorkOrStop));
    if (stop_) return;
    // The job stays alive while its item runs, even if Finish gave up on it.
    std::shared_ptr<Job> job = job_;
    const int item = job->next++;
    ++job->in_progress;
    mu_.Unlock();
    job->task(item);
    mu_.Lock();
    --job->in_progress;
    ++job->by_worker;
  }
}

absl::Status GrammarMaskWorker::Finish() {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Job> job = std::move(job_);
  if (job == nullptr) return absl::OkStatus();
  // What the thread has not claimed is computed here (no wait for it to get there).
  while (job->next < job->n) {
    const int item = job->next++;
    mu_.Unlock();
    job->task(item);
    mu_.Lock();
  }
  Job* const j = job.get();
  if (!mu_.AwaitWithTimeout(
          absl::Condition(+[](Job* j) { return j->in_progress == 0; }, j), deadline_)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "a grammar mask computed during the forward did not finish within ",
        absl::FormatDuration(deadline_)));
  }
  return absl::OkStatus();
}

int GrammarMaskWorker::completed_by_worker() const {
  absl::MutexLock lock(&mu_);
  return job_ == nullptr ? 0 : job_->by_worker;
}

bool GrammarMaskWorker::AwaitWorkerIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(this, &GrammarMaskWorker::WorkerIdle), timeout);
}

bool GrammarMaskWorker::HasWorkOrStop() const {
  return stop_ || (job_ != nullptr && job_->next < job_->n);
}

bool GrammarMaskWorker::WorkerIdle() const {
  return job_ == nullptr || (job_->next >= job_->n && job_->in_progress == 0);
}

}  // namespace lockstep::engine
