// Per-step facts (scheduled, padded, vetoed, deferred, errors, stale updates, tokens,
// drafts, free blocks, step time) in a fixed-size ring, and running counters. Tests and
// the Stats RPC read these rather than log lines.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_STEP_STATS_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_STEP_STATS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

// A count per K (index 0..kMaxDraftTokens).
using DraftKCounts = std::array<int64_t, spec::kMaxDraftTokens + 1>;

// Where this rank's pad dummy came from in a step (docs/design.md §3 steps 3 and 5).
enum class PadSource : int8_t {
  kNone,
  kBeforeSchedule,  // nothing schedulable here while the instance had work
  kAfterSchedule,   // schedulable requests here, but the schedule took none
};

// Why this rank did not pad although it needed to (the last refusal of the step).
enum class PadRefusal : int8_t {
  kNone,
  kAtCap,        // compat: the rank is at max_num_active_requests
  kNoKv,         // the post-schedule dummy found no blocks
  kDummyExists,  // the pre-schedule dummy got no blocks; no second dummy
};

struct StepStats {
  int64_t step = 0;
  int32_t scheduled_context = 0;
  int32_t scheduled_generation = 0;  // including the dummy
  bool padded = false;               // this rank forwarded only the pad dummy
  PadSource pad_source = PadSource::kNone;
  PadRefusal pad_refusal = PadRefusal::kNone;
  bool vetoed = false;    // the fleet skipped the forward
  bool deferred = false;  // the previous batch's update was deferred
  // Rank-local errors (failed requests, failed engine batches) this rank published at
  // this step's vote, and the most any rank published (the reduced vote).
  int32_t errors = 0;
  int32_t max_rank_errors = 0;
  // KV updates of a completed batch skipped because their cache was closed or
  // re-created since the launch, and pad-dummy updates dropped (the dummy's caches never
  // outlive the step that launched it).
  int32_t stale_updates = 0;
  int32_t dummy_updates_dropped = 0;
  int64_t tokens = 0;            // tokens in this rank's batch
  int64_t generated_tokens = 0;  // tokens appended by this step's completion
  int32_t drafts_proposed = 0;
  int32_t drafts_accepted = 0;
  int32_t free_blocks = 0;
  int32_t free_draft_blocks = 0;
  // Tokens in flight on the busiest rank over the mean of the instance's ranks, at the
  // step's load all-gather (1: balanced or idle).
  double token_imbalance = 1.0;
  absl::Duration step_time;
};

struct ExecutorCounters {
  int64_t steps = 0;
  int64_t vetoed_steps = 0;
  int64_t padded_steps = 0;  // this rank forwarded only the dummy
  int64_t dummies_created = 0;
  int64_t dummies_refused = 0;   // padding needed but refused (compat at the cap, no KV)
  int64_t deferred_updates = 0;  // steps whose previous-batch update was deferred
  // KV updates skipped because their cache was closed or re-created since the launch
  // (request terminated, cancelled or paused while its update was deferred or in flight).
  int64_t stale_updates = 0;
  int64_t dummy_updates_dropped = 0;  // pad-dummy updates: its caches died with its step
  int64_t errors = 0;                 // rank-local errors published at the vote
  int64_t error_steps = 0;            // steps at whose vote some rank published an error
  int64_t engine_failures = 0;        // engine batches that failed (dummy-only ones too)
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t rejected = 0;       // refused at intake (validation, draining)
  int64_t prompt_tokens = 0;  // of requests admitted on this rank
  // Prefix reuse: tokens to prefill of every new context cache launched on this rank
  // (prompt, or prompt + output after a pause), and how many of them it reused.
  int64_t context_tokens = 0;
  int64_t reused_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
  // Generation steps of requests by K (index): the drafts asked of each sequence-step.
  // Per rank, summed over ranks like kPerRankCounters.
  DraftKCounts draft_k_steps{};
  // A gauge, not a counter: the rank's generation requests (generation in progress, or
  // KV received and about to generate; not the pad dummy) by the K of their next step
  // (dynamic K moves them), as of the step's load all-gather. Summed over ranks like
  // draft_k_steps.
  DraftKCounts draft_k_requests{};
  // Acceptance by draft position (index j: the j-th draft of a step; index 0 unused):
  // verified generation sequence-steps that proposed a j-th draft, and those that
  // accepted it (a step accepts a prefix of its drafts). Summed over ranks like
  // draft_k_steps.
  DraftKCounts draft_position_proposed{};
  DraftKCounts draft_position_accepted{};
  int64_t paused = 0;
  int64_t no_progress = 0;
  int64_t transfers_received = 0;
  int64_t kv_bytes_received = 0;  // target + draft blocks of completed receives
  int64_t kv_receive_micros = 0;  // summed from StartReceive to completion
  int64_t transfers_sent = 0;
  int64_t transfer_failures = 0;
  int64_t audit_violations = 0;
};

// The counters that differ between ranks (each counts its own requests and steps);
// the instance-wide value is their sum over ranks. The others (steps, vetoed steps,
// error steps) are the same on every rank.
inline constexpr int64_t ExecutorCounters::*kPerRankCounters[] = {
    &ExecutorCounters::padded_steps,
    &ExecutorCounters::dummies_created,
    &ExecutorCounters::dummies_refused,
    &ExecutorCounters::deferred_updates,
    &ExecutorCounters::stale_updates,
    &ExecutorCounters::dummy_updates_dropped,
    &ExecutorCounters::errors,
    &ExecutorCounters::engine_failures,
    &ExecutorCounters::completed,
    &ExecutorCounters::failed,
    &ExecutorCounters::cancelled,
    &ExecutorCounters::rejected,
    &ExecutorCounters::prompt_tokens,
    &ExecutorCounters::context_tokens,
    &ExecutorCounters::reused_tokens,
    &ExecutorCounters::generated_tokens,
    &ExecutorCounters::drafts_proposed,
    &ExecutorCounters::drafts_accepted,
    &ExecutorCounters::paused,
    &ExecutorCounters::no_progress,
    &ExecutorCounters::transfers_received,
    &ExecutorCounters::kv_bytes_received,
    &ExecutorCounters::kv_receive_micros,
    &ExecutorCounters::transfers_sent,
    &ExecutorCounters::transfer_failures,
    &ExecutorCounters::audit_violations,
};
inline constexpr int kNumPerRankCounters =
    static_cast<int>(sizeof(kPerRankCounters) / sizeof(kPerRankCounters[0]));
// The counts by K that differ between ranks, summed over ranks the same way.
inline constexpr DraftKCounts ExecutorCounters::*kPerRankKCounts[] = {
    &ExecutorCounters::draft_k_steps,
    &ExecutorCounters::draft_k_requests,
    &ExecutorCounters::draft_position_proposed,
    &ExecutorCounters::draft_position_accepted,
};

class StepStatsRing {
 public:
  explicit StepStatsRing(int capacity) : ring_(static_cast<size_t>(capacity)) {}
  void Push(const StepStats& s) {
    ring_[next_ % ring_.size()] = s;
    ++next_;
  }
  // Oldest first.
  std::vector<StepStats> Snapshot() const {
    std::vector<StepStats> out;
    const size_t n = next_ < ring_.size() ? next_ : ring_.size();
    for (size_t i = next_ - n; i < next_; ++i) out.push_back(ring_[i % ring_.size()]);
    return out;
  }
  bool empty() const { return next_ == 0; }
  const StepStats& last() const { return ring_[(next_ - 1) % ring_.size()]; }

 private:
  std::vector<StepStats> ring_;
  size_t next_ = 0;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_STEP_STATS_H_
