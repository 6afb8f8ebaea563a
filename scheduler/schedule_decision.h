// The output of one scheduling pass on one rank.
#ifndef LOCKSTEP_SCHEDULER_SCHEDULE_DECISION_H_
#define LOCKSTEP_SCHEDULER_SCHEDULE_DECISION_H_

#include <cstdint>
#include <vector>

#include "scheduler/request.h"
#include "spec_decode/budget.h"

namespace lockstep::sched {

struct ScheduledChunk {
  Request* request = nullptr;
  int64_t position = 0;    // first token of the chunk (after prefix reuse)
  int64_t num_tokens = 0;  // chunk length
  bool last_chunk = false;
  // KV granted for it (and, for a last chunk, the drafts it proposes). An unpaired
  // mirror's capacity covers [draft_position, position) too.
  spec::Grant grant;
  // The draft KV is valid below this position (<= position): the first chunk of a new
  // cache whose unpaired mirror reused less than the target prefills
  // [draft_position, position) in the draft model first. -1: at `position`.
  int64_t draft_position = -1;
  int64_t draft_gap() const { return draft_position < 0 ? 0 : position - draft_position; }
  // The first chunk of its cache (position = the prefix it reused): created this pass, or
  // kept from a pass that scheduled none of it (a pending tier onboard, no room).
  bool new_cache = false;
};

struct ScheduleDecision {
  // Prefill chunks, first-come-first-served.
  std::vector<ScheduledChunk> context;
  // Generation steps (each 1 + K tokens, K per request), oldest first; the dummy, if
  // any, last. generation_grants[i] is generation[i]'s budget: add both with
  // AddGeneration.
  std::vector<Request*> generation;
  std::vector<spec::Grant> generation_grants;
  // Requests paused this pass (KV released, back to kContextInit for recompute).
  std::vector<Request*> paused;
  // Generation-only requests whose blocks were allocated this pass: start their
  // receives. Not part of the batch and not rolled back by a veto (a receive does not
  // need the forward).
  std::vector<Request*> transfer_receives;
  // Tokens in the batch.
  int64_t num_tokens = 0;
  // Schedulable requests existed, nothing was scheduled and nothing is in flight.
  bool no_progress = false;

  void AddGeneration(Request* request, const spec::Grant& grant) {
    generation.push_back(request);
    generation_grants.push_back(grant);
  }
  int64_t batch_size() const { return static_cast<int64_t>(context.size() + generation.size()); }
  bool empty() const { return context.empty() && generation.empty(); }
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_SCHEDULE_DECISION_H_
