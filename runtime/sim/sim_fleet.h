// The simulator over a fleet: several aggregated instances, each built as in
// sim_cluster.h (N ranks on fakes, the audit after every step), behind a simulated
// router that sends each request to the live instance with the fewest in flight and,
// when an instance fails, resumes the requests it held on another live instance as
// continuations of the tokens they had delivered (scheduler/continuation.h), as the
// real router does (runtime/router/core/migration.h).
//
// Every rank of every instance steps together: between two steps all ranks wait at a
// barrier while the router (on one thread) takes the leaders' responses, handles the
// instances that failed, and feeds arrivals, cancels and drains. So a run replays
// exactly from its seed.
//
// An instance failure fails every rank of the instance at the vote of a given step, as
// when one rank dies and its peers stop. Its unfinished requests — in mid-stream,
// waiting, or not yet taken in — migrate, each at most `migration_limit` times, never
// after its client cancelled it, and only while another instance lives.
//
// The run checks that every completed request's output over all its attempts is the
// one the engine's token function gives the original request (what a run without
// failures produces); that every attempt ends at most once and every request once;
// that every failed request is explained by instance failures (the limit, or no live
// instance left) and every cancelled one by its client; and that the pools of every
// live instance are back at their baseline.
#ifndef LOCKSTEP_RUNTIME_SIM_SIM_FLEET_H_
#define LOCKSTEP_RUNTIME_SIM_SIM_FLEET_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {

// Every rank of instance `instance` fails at the vote of fleet step `step`.
struct InstanceFailure {
  int instance = 0;
  int64_t step = 0;
};

struct FleetConfig {
  // Each instance's ranks, scheduler, pools and engine, and the run's seed, workload,
  // step time, step bound and audit. The role must be aggregated; `faults` apply to
  // every instance.
  SimConfig sim;
  int instances = 2;
  std::vector<InstanceFailure> failures;
  // Most migrations of one request (router.migration_limit).
  int migration_limit = 2;

  std::string ToString() const;
};

struct FleetSummary {
  int64_t requests = 0;
  int64_t completed = 0;
  int64_t failed = 0;     // each explained by instance failures
  int64_t cancelled = 0;  // each cancelled by its client
  int64_t failed_instances = 0;
  int64_t migrations = 0;           // continuations submitted
  int64_t migrated_mid_stream = 0;  // of them, after at least one delivered token
  int64_t migrated_completed = 0;   // requests that migrated and completed
  int64_t steps = 0;
  // Every request's output over all its attempts, by workload request id.
  std::map<int64_t, std::vector<int32_t>> outputs;
  // Each line names the seed and the fleet step.
  std::vector<std::string> violations;

  bool ok() const { return violations.empty(); }
  std::string ToString() const;
};

// Runs the whole workload on the fleet. Never hangs: collectives have deadlines and the
// step count is bounded.
FleetSummary RunFleet(const FleetConfig& config);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_SIM_FLEET_H_
