// The per-rank scheduling knobs a deployment sets (the YAML's `instances[i].executor:`
// block parses into them, runtime/config) and their one set of defaults, and the
// instance's role. SchedulerConfig extends the knobs with what the worker derives from
// elsewhere (speculation, prefix reuse, the model's length). One type each for the
// configuration, the scheduler and the executor.
//
// Value type; thread-compatible.
#ifndef LOCKSTEP_SCHEDULER_SCHEDULER_SETTINGS_H_
#define LOCKSTEP_SCHEDULER_SCHEDULER_SETTINGS_H_

#include <cstdint>

namespace lockstep::sched {

// What an instance serves (docs/design.md §2), and so which request types its ranks
// schedule. YAML: aggregated | context | generation; on the wire proto/worker.proto's
// InstanceRole, converted by config::RoleToWire and RoleFromWire only.
enum class InstanceRole { kAggregated, kContext, kGeneration };

// "aggregated", "context" or "generation": the YAML spelling.
const char* InstanceRoleName(InstanceRole role);

// How a rank pads a step in which it has nothing to forward (docs/design.md §1).
// YAML: reserved | compat.
enum class DummyPolicy {
  // TensorRT-LLM's behaviour: the dummy competes for KV like any request and is refused
  // at max_num_active_requests, so a full rank vetoes the forward on every rank.
  kCompat,
  // A request slot and enough KV for the dummy are reserved at start-up, outside
  // max_num_active_requests: padding cannot be refused.
  kReserved,
};

// "compat" or "reserved": the YAML spelling.
const char* DummyPolicyName(DummyPolicy policy);

// When a rank admits a new request's KV (TensorRT-LLM's capacity scheduler policies).
// YAML: max_utilization | guaranteed_no_evict.
enum class CapacityPolicy {
  // Admit while blocks last; when a running request cannot grow, pause the youngest
  // holders (their KV released and recomputed later, or brought back from a KV tier).
  kMaxUtilization,
  // Admit a new request only when its whole context and max_tokens fit beside what every
  // request holding KV may still grow by (its prompt plus max_tokens, less what it
  // holds), so running requests are not paused for new ones. Pausing stays the fallback
  // (a lone request is always admitted; a prefix another request evicts can still run
  // short).
  kGuaranteedNoEvict,
};

// "max_utilization" or "guaranteed_no_evict": the YAML spelling.
const char* CapacityPolicyName(CapacityPolicy policy);

struct SchedulerSettings {
  // Most requests (context chunks + generation steps) in one step's batch.
  int32_t max_batch_size = 8;
  // Most tokens in one step's batch (a generation step costs 1 + K tokens).
  int64_t max_num_tokens = 512;
  // Most requests a rank holds, including requests waiting for KV (not the dummy under
  // kReserved). Enforced by rank assignment and by the pad decision.
  int32_t max_num_active_requests = 16;
  // Largest prefill chunk per request per step (chunked prefill); <= max_num_tokens.
  int64_t chunk_size = 64;
  DummyPolicy dummy_policy = DummyPolicy::kReserved;
  CapacityPolicy capacity_policy = CapacityPolicy::kMaxUtilization;
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_SCHEDULER_SETTINGS_H_
