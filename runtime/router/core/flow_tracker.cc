#include "runtime/router/core/flow_tracker.h"

namespace lockstep::router {

bool FlowHandle::BeginLeg(const std::string& instance, grpc::ClientContext* call) {
  absl::MutexLock lock(&mu_);
  if (!cancel_reason_.ok()) return false;
  instance_ = instance;
  call_ = call;
  leg_failure_ = absl::OkStatus();
  return true;
}

bool FlowHandle::BeginLeg(const std::string& instance, std::shared_ptr<grpc::ClientContext> call) {
  absl::MutexLock lock(&mu_);
  if (!cancel_reason_.ok()) return false;
  instance_ = instance;
  call_ = call.get();
  shared_call_ = std::move(call);
  leg_failure_ = absl::OkStatus();
  return true;
}

void FlowHandle::EndLeg() {
  absl::MutexLock lock(&mu_);
  instance_.clear();
  call_ = nullptr;
  shared_call_.reset();
}

void FlowHandle::Cancel(const absl::Status& reason) {
  std::shared_ptr<grpc::ClientContext> shared;
  {
    absl::MutexLock lock(&mu_);
    if (cancel_reason_.ok()) cancel_reason_ = reason;
    shared = shared_call_;
    // A synchronous call's TryCancel only marks it cancelled; it runs none of our code.
    // The lock keeps the flow thread from destroying the context meanwhile (EndLeg
    // waits for it).
    if (shared == nullptr && call_ != nullptr) call_->TryCancel();
  }
  if (shared != nullptr) shared->TryCancel();
}

bool FlowHandle::CancelLeg(const std::string& instance, const absl::Status& reason) {
  std::shared_ptr<grpc::ClientContext> shared;
  {
    absl::MutexLock lock(&mu_);
    if (call_ == nullptr || instance_ != instance) return false;
    if (leg_failure_.ok()) leg_failure_ = reason;
    shared = shared_call_;
    if (shared == nullptr) call_->TryCancel();
  }
  if (shared != nullptr) shared->TryCancel();
  return true;
}

absl::Status FlowHandle::leg_failure() const {
  absl::MutexLock lock(&mu_);
  return leg_failure_;
}

absl::Status FlowHandle::cancel_reason() const {
  absl::MutexLock lock(&mu_);
  return cancel_reason_;
}

std::string FlowHandle::instance() const {
  absl::MutexLock lock(&mu_);
  return instance_;
}

bool FlowHandle::ClientConnected() {
  absl::MutexLock lock(&callback_mu_);
  return detached_ || client_connected_();
}

void FlowHandle::Detach() {
  absl::MutexLock lock(&callback_mu_);
  detached_ = true;
}

void FlowTracker::Add(std::shared_ptr<FlowHandle> flow) {
  absl::Status closed;
  {
    absl::MutexLock lock(&mu_);
    flows_[flow->request_id()] = flow;
    closed = closed_;
  }
  if (!closed.ok()) flow->Cancel(closed);
}

void FlowTracker::Remove(uint64_t request_id) {
  absl::MutexLock lock(&mu_);
  flows_.erase(request_id);
}

std::vector<std::shared_ptr<FlowHandle>> FlowTracker::Flows() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<FlowHandle>> flows;
  flows.reserve(flows_.size());
  for (const auto& [id, flow] : flows_) flows.push_back(flow);
  return flows;
}

int FlowTracker::CancelOnInstance(const std::string& instance, const absl::Status& reason) {
  int cancelled = 0;
  for (const auto& flow : Flows()) {
    if (flow->CancelLeg(instance, reason)) ++cancelled;
  }
  return cancelled;
}

int FlowTracker::CancelDisconnected() {
  int cancelled = 0;
  for (const auto& flow : Flows()) {
    if (!flow->ClientConnected()) {
      flow->Cancel(absl::CancelledError("the client disconnected"));
      ++cancelled;
    }
  }
  return cancelled;
}

void FlowTracker::Close(const absl::Status& reason) {
  {
    absl::MutexLock lock(&mu_);
    closed_ = reason;
  }
  for (const auto& flow : Flows()) flow->Cancel(reason);
}

size_t FlowTracker::size() const {
  absl::MutexLock lock(&mu_);
  return flows_.size();
}

}  // namespace lockstep::router
