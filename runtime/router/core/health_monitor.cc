#include "runtime/router/core/health_monitor.h"

#include <chrono>

#include "common/log.h"
#include "fmt/format.h"
#include "grpcpp/grpcpp.h"

namespace lockstep::router {
namespace {

void SetDeadline(grpc::ClientContext& call, absl::Duration timeout) {
  call.set_deadline(std::chrono::system_clock::now() +
                    std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
}

}  // namespace

void HealthMonitor::CheckOnce() {
  for (const std::string& name : registry_.ExpireHeartbeats()) {
    CancelFlows(name, "it missed its heartbeats");
  }
  for (const InstanceTarget& target : registry_.PollTargets()) Poll(target);
}

void HealthMonitor::Poll(const InstanceTarget& target) {
  std::shared_ptr<v1::WorkerService::Stub> stub = stubs_.GetControl(target.address);
  // Responses from the instance's streams since its previous poll.
  bool progressed = false;
  if (progress_ != nullptr) {
    const int64_t now = progress_->Read(target.name);
    auto [it, inserted] = progress_at_poll_.try_emplace(target.name, now);
    progressed = !inserted && now != it->second;
    it->second = now;
  }
  v1::HealthResponse health;
  grpc::ClientContext call;
  SetDeadline(call, rpc_timeout_);
  const grpc::Status status = stub->Health(&call, v1::HealthRequest(), &health);
  if (!status.ok()) {
    const std::string reason =
        fmt::format("health check of {} failed: {}", target.address, status.error_message());
    if (progressed) {
      LOCKSTEP_LOG_INFO("router", "{} while its streams make progress: not counted", reason);
      return;
    }
    if (registry_.ReportPollFailed(target, reason, /*immediate=*/false)) {
      CancelFlows(target.name, reason);
    }
    return;
  }
  if (health.state() == v1::HealthResponse::STATE_NOT_PROGRESSING ||
      health.state() == v1::HealthResponse::STATE_UNSPECIFIED) {
    const std::string reason =
        fmt::format("it reports no progress (step {}): {}", health.step_count(), health.message());
    if (registry_.ReportPollFailed(target, reason, /*immediate=*/true)) {
      CancelFlows(target.name, reason);
    }
    return;
  }
  registry_.ReportPollOk(target, health.state() == v1::HealthResponse::STATE_DRAINING);

  v1::StatsResponse stats;
  grpc::ClientContext stats_call;
  SetDeadline(stats_call, rpc_timeout_);
  if (stub->Stats(&stats_call, v1::StatsRequest(), &stats).ok()) {
    registry_.ReportStats(target, stats);
  }
}

void HealthMonitor::CancelFlows(const std::string& instance, const std::string& reason) {
  const int cancelled = flows_.CancelOnInstance(
      instance,
      absl::UnavailableError(fmt::format(
          "instance {} became unhealthy while serving this request: {}", instance, reason)));
  LOCKSTEP_LOG_WARN("router", "instance {} is unhealthy ({}); cancelled {} in-flight requests",
                    instance, reason, cancelled);
}

}  // namespace lockstep::router
