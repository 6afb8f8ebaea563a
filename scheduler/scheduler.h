// The per-rank scheduling policy (docs/design.md §3 step 4), in the anchor's order:
//
//  1. Generation steps first, oldest first: each grows the request's caches by 1 + K
//     tokens in the target pool and, with speculation, in the draft pool (an unpaired
//     draft mirror is admitted here, so its creation is covered by the same rollback).
//     K stops at the model's last position (GrantedDraftTokens): the step's last token
//     sits at most at the target capacity (its history once the step in flight, if any,
//     accepted every draft); a request whose step in flight may reach the last position
//     waits for that step's result.
//  2. Then prefill chunks, first-come-first-served, chunked by `chunk_size` and the
//     token budget; a new context cache reuses its longest committed prefix (with every
//     draft pool: a paired draft cache reuses with it; an unpaired mirror reuses its
//     own, possibly shorter prefix, and the chunk's draft_position says where the draft
//     model starts).
//  3. Then KV for generation-only requests waiting for their transfer (the prompt's
//     blocks in every pool); these become `transfer_receives`.
//
// Order: requests that hold KV first, in the order they first got it, then the others
// in arrival order. Limits: max_batch_size requests and max_num_tokens tokens per step.
// When growth fails for lack of blocks, the youngest requests (by the order they first
// got KV) that are not yet in this step's batch are paused — KV released, recomputed
// later — and the growth is retried; if it still fails, the request itself is refused
// this step (it keeps its KV; an older request may pause it later), and no younger
// context request jumps ahead of it. An older request is never paused for a younger
// one, so the oldest request always progresses. Under CapacityPolicy::kGuaranteedNoEvict
// a request that holds nothing yet is admitted (its cache created) only when its context
// and max_tokens fit beside what every holder may still grow by; otherwise it and
// everyone behind it wait (FitsWithoutEviction).
//
// Every cache created and every capacity raised is recorded in the caller's Rollback,
// so a vetoed step can be undone exactly.
//
// Thread safety: owned by the executor thread.
#ifndef LOCKSTEP_SCHEDULER_SCHEDULER_H_
#define LOCKSTEP_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kvcache/kv_manager.h"
#include "scheduler/kv_rollback.h"
#include "scheduler/request.h"
#include "scheduler/schedule_decision.h"
#include "scheduler/scheduler_config.h"

namespace lockstep::sched {

// Counters kept across passes.
struct SchedulerStats {
  int64_t passes = 0;
  int64_t paused = 0;       // requests paused under KV pressure
  int64_t no_progress = 0;  // passes with candidates but nothing scheduled or in flight
  int64_t growth_failures = 0;
};

class Scheduler {
 public:
  // `kv` must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, kv::KvManager* kv);

  // One pass over `active` (this rank's requests in arrival order; a pad dummy last).
  // `in_flight` says whether a launched step has not been completed yet.
  ScheduleDecision Schedule(absl::Span<Request* const> active, bool in_flight, Rollback* rollback);

  // Grows a pad dummy like a generation step with the instance's K and adds it, with
  // its grant, to `decision` (the post-schedule pad). Returns false (nothing changed)
  // when it does not fit.
  bool ScheduleDummy(Request* dummy, ScheduleDecision* decision, Rollback* rollback);

  // What the executor needs for the pad decision: requests that could be scheduled
  // (excluding the dummy).
  static int64_t CountSchedulable(absl::Span<Request* const> active);
  // Requests counting toward max_num_active_requests (everything live but the dummy).
  static int64_t CountActive(absl::Span<Request* const> active);
  bool AtCap(absl::Span<Request* const> active) const {
    return CountActive(active) >= config_.max_num_active_requests;
  }

  // K of `request`'s next step (0: no speculation): the instance's K, or with dynamic
  // K the request's own choice (the dummy always takes the instance's);
  // spec::SpeculativeConfig::StepDraftTokens.
  int32_t DraftTokensFor(const Request& request) const;
  // The K a pass grants `request` (the one place it is decided: the grant carries it to
  // the KV budget, the engine's verification and its drafter): DraftTokensFor capped by
  // the positions the model has left after `position`, the furthest its next step's
  // last token may sit (spec::CapDraftTokens; -1: not even K = 0 fits).
  int32_t GrantedDraftTokens(const Request& request, int64_t position) const;

  const SchedulerConfig& config() const { return config_; }
  const SchedulerStats& stats() const { return stats_; }

 private:
  // Grows `request` by `tokens` of capacity in every pool it needs (admitting an
  // unpaired mirror first). False, with everything this call did undone, when blocks
  // run out.
  bool GrowBy(Request* request, int64_t tokens, Rollback* rollback);
  // Pauses requests younger than `requester` that are not in `scheduled`, youngest
  // first, until `fits` is true or none is left. Returns whether it fits now.
  template <typename Fits>
  bool MakeRoom(const Request* requester, absl::Span<Request* const> active,
                ScheduleDecision* decision, Fits fits);
  void Pause(Request* request, ScheduleDecision* decision);
  // CapacityPolicy::kGuaranteedNoEvict's admission test for `request` (no cache yet):
  // its context past the reused prefix plus its max_tokens fits beside the growth every
  // other holder in `order` may still need; true when no other request holds KV.
  bool FitsWithoutEviction(const Request& request, absl::Span<Request* const> order,
                           absl::Span<const int32_t> reuse_from) const;

  SchedulerConfig config_;
  kv::KvManager* kv_;
  int64_t next_start_order_ = 0;
  SchedulerStats stats_;
  std::vector<Request*> order_;  // scratch: this pass's candidate order
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_SCHEDULER_H_
