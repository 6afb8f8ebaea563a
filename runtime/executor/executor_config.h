// Configuration of one rank's executor.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_CONFIG_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kvcache/kv_manager.h"
#include "scheduler/scheduler_config.h"

namespace lockstep::exec {

struct ExecutorConfig {
  // Instance name and this process's place in it.
  std::string instance = "local";
  sched::InstanceRole role = sched::InstanceRole::kAggregated;
  int32_t rank = 0;
  int32_t world_size = 1;

  sched::SchedulerConfig scheduler;
  kv::KvManagerConfig kv;

  // Deadline of every collective the step runs (intake, loads, vote, responses).
  absl::Duration collective_timeout = absl::Seconds(30);
  // How long to wait for the engine to finish a step before this rank gives up.
  absl::Duration engine_timeout = absl::Seconds(120);
  // Generation side: a KV receive not complete by then fails its request.
  absl::Duration transfer_deadline = absl::Seconds(10);
  // Context side: a transfer claim nobody pulled is released after this lease.
  absl::Duration claim_lease = absl::Seconds(30);
  // After a drain order, requests still running after this are failed.
  absl::Duration drain_timeout = absl::Seconds(120);
  // This rank's KV transfer endpoint (host:port), given to generation instances in
  // the context handle of context-only responses.
  std::string transfer_address;

  // KV events: every rank reports the keys its target radix tree published and evicted
  // at the step's response gather; the leader hands them to Deps::kv_event_sink. The
  // same on every rank of an instance.
  bool kv_events = false;

  // Run the invariant audit (docs/design.md §7) after every step.
  bool audit_every_step = false;
  // Steps kept in the StepStats ring buffer.
  int32_t stats_ring_size = 1024;

  absl::Status Validate() const;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_EXECUTOR_CONFIG_H_
