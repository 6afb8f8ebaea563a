#include "tools/bench/draft_k_sampler.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "tools/bench/instance_stats.h"

namespace lockstep::bench {

void DraftKAverages::Add(const std::map<std::string, InstanceDelta>& read) {
  for (const auto& [name, instance] : read) {
    Sum& sum = sums_[name];
    ++sum.samples;
    if (sum.totals.size() < instance.draft_k_requests.size()) {
      sum.totals.resize(instance.draft_k_requests.size());
    }
    for (size_t k = 0; k < instance.draft_k_requests.size(); ++k) {
      sum.totals[k] += instance.draft_k_requests[k];
    }
  }
}

void DraftKAverages::Fill(std::vector<InstanceDelta>* deltas) const {
  for (InstanceDelta& d : *deltas) {
    const auto it = sums_.find(d.name);
    if (it == sums_.end() || it->second.samples == 0) continue;
    const Sum& sum = it->second;
    d.draft_k_request_samples = sum.samples;
    d.mean_draft_k_requests.clear();
    for (int64_t total : sum.totals) {
      d.mean_draft_k_requests.push_back(static_cast<double>(total) /
                                        static_cast<double>(sum.samples));
    }
  }
}

DraftKSampler::DraftKSampler(std::string router_grpc_address, absl::Duration interval)
    : address_(std::move(router_grpc_address)), interval_(interval), thread_([this] { Run(); }) {}

DraftKSampler::~DraftKSampler() {
  if (thread_.joinable()) Stop();
}

void DraftKSampler::Run() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    absl::StatusOr<std::map<std::string, InstanceDelta>> read = ReadInstanceCounters(address_);
    if (!read.ok()) continue;
    absl::MutexLock lock(&mu_);
    averages_.Add(*read);
  }
}

DraftKAverages DraftKSampler::Stop() {
  stop_.Notify();
  thread_.join();
  absl::MutexLock lock(&mu_);
  return averages_;
}

}  // namespace lockstep::bench
