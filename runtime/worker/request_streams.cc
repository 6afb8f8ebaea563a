#include "runtime/worker/request_streams.h"

#include "absl/strings/str_cat.h"

namespace lockstep::worker {

void ResponseQueue::Push(exec::Response response) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(response));
}

std::optional<exec::Response> ResponseQueue::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
  exec::Response r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

absl::StatusOr<std::shared_ptr<ResponseQueue>> RequestStreams::Open(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = streams_.emplace(id, nullptr);
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", id.value(), " is already running on this instance"));
  }
  it->second = std::make_shared<ResponseQueue>();
  return it->second;
}

void RequestStreams::Close(RequestId id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

void RequestStreams::OnResponses(std::vector<exec::Response> responses) {
  absl::MutexLock lock(&mu_);
  for (exec::Response& r : responses) {
    auto it = streams_.find(r.id);
    if (it == streams_.end()) continue;  // the client left
    // A context-only request's hand-off is its last response on this instance.
    const bool last = r.finished || r.context.has_value();
    it->second->Push(std::move(r));
    if (last) streams_.erase(it);
  }
}

void RequestStreams::FailAll(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, queue] : streams_) {
    exec::Response r;
    r.id = id;
    r.finished = true;
    r.finish_reason = sched::FinishReason::kError;
    r.status = status;
    queue->Push(std::move(r));
  }
  streams_.clear();
}

int64_t RequestStreams::open_streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(streams_.size());
}

}  // namespace lockstep::worker
