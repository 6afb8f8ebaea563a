// One round of the router's instance checks: expire registered instances whose
// heartbeats stopped, poll every known leader's Health (and, when it answers, Stats),
// and cancel the in-flight requests of every instance that just stopped being healthy,
// with an error that names the instance and why.
//
// Polls run one after another, each bounded by `rpc_timeout` (the router uses the
// larger of the check interval and 1 s), on channels of their own (WorkerStubs::
// GetControl): a poll never waits behind the router's generation streams. A poll that
// goes unanswered (or fails otherwise) while the instance's streams delivered responses
// since the previous poll (InstanceProgress) is not counted as failed: a worker busy
// with thousands of streams answers late, but is alive. An instance that reports no
// progress, or stops streaming too, fails as before. Thread safety: CheckOnce
// is called by one thread at a time (the router's monitor thread, or a test).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_HEALTH_MONITOR_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_HEALTH_MONITOR_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "runtime/router/core/flow_tracker.h"
#include "runtime/router/core/instance_progress.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/worker_stubs.h"

namespace lockstep::router {

class HealthMonitor {
 public:
  // Every reference must outlive the monitor.
  // `progress` (may be null: every missed poll counts) is the runner's.
  HealthMonitor(InstanceRegistry& registry, WorkerStubs& stubs, FlowTracker& flows,
                absl::Duration rpc_timeout, const InstanceProgress* progress = nullptr)
      : registry_(registry),
        stubs_(stubs),
        flows_(flows),
        rpc_timeout_(rpc_timeout),
        progress_(progress) {}

  void CheckOnce();

 private:
  void Poll(const InstanceTarget& target);
  void CancelFlows(const std::string& instance, const std::string& reason);

  InstanceRegistry& registry_;
  WorkerStubs& stubs_;
  FlowTracker& flows_;
  const absl::Duration rpc_timeout_;
  const InstanceProgress* const progress_;
  // Each instance's progress count at its previous poll (monitor thread only).
  absl::flat_hash_map<std::string, int64_t> progress_at_poll_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_HEALTH_MONITOR_H_
