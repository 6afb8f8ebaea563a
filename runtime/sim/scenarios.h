// Named simulator scenarios and the random-configuration generator.
#ifndef LOCKSTEP_RUNTIME_SIM_SCENARIOS_H_
#define LOCKSTEP_RUNTIME_SIM_SCENARIOS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/sim/sim_cluster.h"
#include "runtime/sim/sim_fleet.h"

namespace lockstep::sim {

// The shape of the motivating failure (docs/design.md §1): DEP4 generation instance,
// generation-only requests arriving with transfer latency, K = 3 with an unpaired draft
// pool, `max_batch_size` (and max_num_active_requests) per rank small.
SimConfig Dep4SmallBatch(int32_t max_batch_size, sched::DummyPolicy policy, uint64_t seed,
                         int64_t num_requests = 1600);

// A random configuration: ranks 2–8, max_batch_size 1–16, K 0–4, no/paired/unpaired
// draft pool (draft model), MTP over a paired draft pool or the n-gram drafter, both
// dummy policies, aggregated, generation-only or context-only, faults (vetoes, cancels,
// transfer failures, send refusals) on or off, prefix reuse mostly on (in every draft
// mode), independent requests or multi-turn conversations over a shared system prompt
// (follow-ups hinted to their previous turn's rank or not), a draft pool as large as
// the target's or smaller.
SimConfig RandomConfig(uint64_t seed);

// A random fleet (sim_fleet.h): RandomConfig(seed) made aggregated with at most 4
// ranks per instance, 2–4 instances, 1 to instances − 1 failures (each of a random
// instance at one of the first 50 steps), a migration limit of 1–3.
FleetConfig RandomFleetConfig(uint64_t seed);

// "dep4-small-batch" -> the scenario; anything else is an error naming it.
absl::StatusOr<SimConfig> ScenarioByName(absl::string_view name, int32_t max_batch_size,
                                         sched::DummyPolicy policy, uint64_t seed);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_SCENARIOS_H_
