#include "runtime/engine/engine_thread.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {

EngineThread::EngineThread(EngineInfo info, std::unique_ptr<EngineParts> parts)
    : info_(info), parts_(std::move(parts)), thread_([this] { Loop(); }) {}

EngineThread::~EngineThread() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  thread_.join();
}

void EngineThread::Launch(Batch batch) {
  absl::MutexLock lock(&mu_);
  launched_.push_back(batch.step);
  queue_.push_back(std::move(batch));
}

absl::StatusOr<BatchResult> EngineThread::Collect(StepId step, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (launched_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Collect(step ", step.value(), "): no batch is in flight"));
  }
  if (launched_.front() != step) {
    return absl::FailedPreconditionError(absl::StrCat("Collect(step ", step.value(),
                                                      "): the oldest batch in flight is step ",
                                                      launched_.front().value()));
  }
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !results_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "step ", step.value(), " is still running after ", absl::FormatDuration(timeout)));
  }
  Outcome outcome = std::move(results_.front());
  results_.pop_front();
  launched_.pop_front();
  if (!outcome.status.ok()) return outcome.status;
  return std::move(outcome.result);
}

void EngineThread::Loop() {
  while (true) {
    Batch batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || !queue_.empty(); };
      while (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1))) {
      }
      if (queue_.empty()) return;  // shut down with nothing left to run
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<BatchResult> result = parts_->Run(batch);
    Outcome outcome;
    if (result.ok()) {
      outcome.result = *std::move(result);
    } else {
      outcome.status = result.status();
    }
    absl::MutexLock lock(&mu_);
    results_.push_back(std::move(outcome));
  }
}

}  // namespace lockstep::engine
