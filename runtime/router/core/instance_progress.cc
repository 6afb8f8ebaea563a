#include "runtime/router/core/instance_progress.h"

namespace lockstep::router {

InstanceProgress::Counter InstanceProgress::For(const std::string& instance) {
  absl::MutexLock lock(&mu_);
  Counter& counter = counters_[instance];
  if (counter == nullptr) counter = std::make_shared<std::atomic<int64_t>>(0);
  return counter;
}

int64_t InstanceProgress::Read(const std::string& instance) const {
  absl::MutexLock lock(&mu_);
  auto it = counters_.find(instance);
  return it == counters_.end() ? 0 : it->second->load();
}

}  // namespace lockstep::router
