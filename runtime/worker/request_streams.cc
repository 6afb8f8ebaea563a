#include "runtime/worker/request_streams.h"

#include "absl/strings/str_cat.h"

namespace lockstep::worker {

void ResponseQueue::Push(exec::Response response) {
  std::shared_ptr<const std::function<void()>> listener;
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(response));
    listener = listener_;
  }
  if (listener != nullptr) (*listener)();
}

std::optional<exec::Response> ResponseQueue::TryPop() {
  absl::MutexLock lock(&mu_);
  if (queue_.empty()) return std::nullopt;
  exec::Response r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

void ResponseQueue::SetListener(std::function<void()> listener) {
  std::shared_ptr<const std::function<void()>> now;
  {
    absl::MutexLock lock(&mu_);
    listener_ = listener == nullptr
                    ? nullptr
                    : std::make_shared<const std::function<void()>>(std::move(listener));
    if (!queue_.empty()) now = listener_;
  }
  if (now != nullptr) (*now)();
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
  // Routed under the lock, pushed outside it: a push runs its stream's listener, which
  // may Close() streams.
  std::vector<std::pair<std::shared_ptr<ResponseQueue>, exec::Response*>> routed;
  routed.reserve(responses.size());
  {
    absl::MutexLock lock(&mu_);
    for (exec::Response& r : responses) {
      auto it = streams_.find(r.id);
      if (it == streams_.end()) continue;  // the client left
      routed.emplace_back(it->second, &r);
      // A context-only request's hand-off is its last response on this instance.
      if (r.finished || r.context.has_value()) streams_.erase(it);
    }
  }
  for (auto& [queue, r] : routed) queue->Push(std::move(*r));
}

void RequestStreams::FailAll(const absl::Status& status) {
  absl::flat_hash_map<RequestId, std::shared_ptr<ResponseQueue>> failed;
  {
    absl::MutexLock lock(&mu_);
    failed.swap(streams_);
  }
  for (auto& [id, queue] : failed) {
    exec::Response r;
    r.id = id;
    r.finished = true;
    r.finish_reason = sched::FinishReason::kError;
    r.status = status;
    queue->Push(std::move(r));
  }
}

int64_t RequestStreams::open_streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(streams_.size());
}

}  // namespace lockstep::worker
