// The simulator: one instance of N ranks in one process (RankStacks, rank_stack.h) —
// InProcessCommunicator, the FakeEngine, the FakeTransceiver, a FakeClock per rank (all
// advanced by the same step time, so runs replay exactly) — driven by a seeded
// workload, with the invariant audit of docs/design.md §7 run on every rank after every
// step. Each rank runs its real Executor::Step() on its own thread; the collectives
// keep them in lockstep.
//
// At the end the leader sends the drain order; every rank stops when the drain is
// complete everywhere. The run then checks that every pool is back to its baseline,
// that every request was answered exactly once, that every completed request's tokens
// are the ones the engine's token function defines (greedy correctness through pauses,
// vetoes, deferrals and stale updates), and that every request that failed or was
// cancelled is explained by a fault the run injected into it.
#ifndef LOCKSTEP_RUNTIME_SIM_SIM_CLUSTER_H_
#define LOCKSTEP_RUNTIME_SIM_SIM_CLUSTER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/communicator.h"
#include "runtime/executor/executor_config.h"
#include "runtime/sim/expert_exchange.h"
#include "runtime/sim/workload.h"
#include "runtime/transfer/fake_transceiver.h"
#include "scheduler/scheduler_config.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {

// A fault at the k-th call of a collective tag on a rank.
struct SimFault {
  enum class Kind { kVeto, kDelay };
  Kind kind = Kind::kVeto;
  int rank = 0;
  int64_t step = 0;  // occurrence of the "vote" collective (veto) or "loads" (delay)
  absl::Duration delay = absl::Milliseconds(1);
};

struct SimConfig {
  uint64_t seed = 1;
  int ranks = 4;
  // kGeneration: generation-only workload; kContext: context-only (legs end at the KV
  // hand-off).
  sched::InstanceRole role = sched::InstanceRole::kAggregated;
  sched::SchedulerConfig scheduler;
  kv::DraftMode draft_mode = kv::DraftMode::kNone;
  int32_t tokens_per_block = 16;
  int32_t num_blocks = 256;        // per rank, target pool
  int32_t draft_num_blocks = 256;  // per rank, draft pool
  // Per rank, a host KV tier below the target pool, in blocks (kvcache/kv_tiers.h;
  // 0: none; needs prefix reuse and no draft pool).
  int32_t host_tier_blocks = 0;
  WorkloadConfig workload;
  double draft_acceptance = 0.6;
  bool threaded_engine = false;
  absl::Duration transfer_min_latency = absl::Milliseconds(1);
  absl::Duration transfer_max_latency = absl::Milliseconds(30);
  double transfer_failure_rate = 0.0;
  // kUcx: each injected transfer failure is one of the UCX data plane's faults
  // (FakeTransport in runtime/transfer/fake_transceiver.h).
  transfer::FakeTransport transfer_transport = transfer::FakeTransport::kTcp;
  // Context role: the transceiver refuses this fraction of sends (the request fails).
  double send_refusal_rate = 0.0;
  absl::Duration transfer_deadline = absl::Seconds(10);
  std::vector<SimFault> faults;
  absl::Duration step_time = absl::Milliseconds(1);
  int64_t max_steps = 200000;
  bool audit = true;
  // Expert parallelism with load balancing: the exchange's per-rank load and placement
  // changes at vote-agreed steps (expert_exchange.h); off by default.
  SimEplbConfig eplb;
  // The ranks' communicators (RankStackOptions::make_group); default in-process.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<comm::Communicator>>>(int ranks)>
      make_group;

  std::string ToString() const;
};

struct SimSummary {
  int64_t requests = 0;
  int64_t completed = 0;   // finished by length or stop
  int64_t handed_off = 0;  // context-only legs that handed off their KV
  int64_t failed = 0;      // finished with an error (each explained by an injected fault)
  int64_t cancelled = 0;   // each cancelled by the client
  int64_t steps = 0;
  int64_t vetoed_steps = 0;      // on the leader (every rank sees the same vetoes)
  int64_t padded_steps = 0;      // summed over ranks
  int64_t dummies_refused = 0;   // summed over ranks
  int64_t deferred_updates = 0;  // summed over ranks
  int64_t stale_updates = 0;     // summed over ranks
  int64_t paused = 0;
  int64_t no_progress = 0;
  int64_t generated_tokens = 0;
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
  // Generation steps of requests by the K they ran with, summed over ranks.
  std::array<int64_t, spec::kMaxDraftTokens + 1> draft_k_steps{};
  int64_t transfer_failures = 0;
  int64_t send_refusals = 0;  // sends the transceiver was told to refuse
  int64_t transfer_fallbacks = 0;  // UCX offers refused: pulled over TCP instead
  // Prefix reuse, summed over ranks: tokens new context caches had to prefill, and of
  // those reused (ExecutorCounters).
  int64_t context_tokens = 0;
  int64_t reused_tokens = 0;
  // As the KV managers count it (every cache created, also in steps a veto undid):
  // target caches, and unpaired draft mirrors from their own pools (less than their
  // targets: the draft model prefilled the difference).
  int64_t kv_reused_tokens = 0;
  int64_t mirror_reused_tokens = 0;
  // Prefix tokens the KV managers brought back from their host tiers.
  int64_t tier_onboarded_tokens = 0;
  double tokens_per_step = 0;
  SimEplbSummary eplb;  // with SimConfig::eplb
  double vetoes_per_1000_steps = 0;
  // A hash (FNV-1a, starting from its offset basis) of every request's outcome in
  // workload order: finish reason, tokens, and the step and rank that answered it. Two
  // runs that replay the same way have the same digest, in any process.
  uint64_t outcome_digest = 0xcbf29ce484222325ULL;
  // Problems: audit violations, wrong tokens, leaked blocks, a rank's error, a request
  // answered twice or failed without an injected fault. Each line names the seed, step
  // and rank.
  std::vector<std::string> violations;

  bool ok() const { return violations.empty(); }
  std::string ToString() const;
};

// Runs the whole workload. Never hangs: collectives have deadlines and the step count
// is bounded.
SimSummary RunSimulation(const SimConfig& config);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_SIM_CLUSTER_H_
