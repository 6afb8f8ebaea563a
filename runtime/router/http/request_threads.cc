#include "runtime/router/http/request_threads.h"

#include <system_error>
#include <utility>

#include "fmt/format.h"

namespace lockstep::router {

absl::Status RequestThreads::Run(std::function<void()> body) {
  JoinFinished();
  absl::MutexLock lock(&mu_);
  if (closed_)
    return absl::UnavailableError("the router is shutting down; retry on another router");
  const uint64_t id = next_id_++;
  try {
    // The thread finds itself in running_ when it ends: it is inserted under the lock
    // its end takes.
    running_.emplace(id, std::thread([this, id, body = std::move(body)] {
                       body();
                       Finished(id);
                     }));
  } catch (const std::system_error& error) {
    return absl::UnavailableError(fmt::format(
        "the router cannot start a thread for the request ({}); retry later", error.what()));
  }
  return absl::OkStatus();
}

std::shared_ptr<void> RequestThreads::Track() {
  absl::MutexLock lock(&mu_);
  if (closed_) return nullptr;
  ++tracked_;
  return std::shared_ptr<void>(this, [](RequestThreads* self) {
    absl::MutexLock lock(&self->mu_);
    --self->tracked_;
  });
}

void RequestThreads::Finished(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = running_.find(id);
  finished_.push_back(std::move(it->second));
  running_.erase(it);
}

void RequestThreads::JoinFinished() {
  std::vector<std::thread> done;
  {
    absl::MutexLock lock(&mu_);
    done.swap(finished_);
  }
  for (std::thread& thread : done) thread.join();
}

void RequestThreads::JoinAll() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  for (;;) {
    JoinFinished();
    absl::MutexLock lock(&mu_);
    if (running_.empty() && finished_.empty() && tracked_ == 0) return;
    // The requests were told to end (their clients cut, their flows closed): each
    // returns within its own bounds.
    mu_.Await(absl::Condition(
        +[](RequestThreads* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
          return !self->finished_.empty() || (self->running_.empty() && self->tracked_ == 0);
        },
        this));
  }
}

bool RequestThreads::AwaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](RequestThreads* self)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                 return self->running_.empty() && self->tracked_ == 0;
               },
          this),
      timeout);
}

int64_t RequestThreads::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(running_.size()) + tracked_;
}

}  // namespace lockstep::router
