// The KV budget of speculative decoding: how much target and draft KV one scheduled
// piece of work is granted. The scheduler computes it once per piece and carries it in
// the ScheduleDecision; the executor reads it (launch, then returning the unused part
// after acceptance) instead of recomputing it. docs/design.md §6.
//
//  * A generation step with K drafts verifies K + 1 positions: 1 + K tokens in the
//    target pool and, with a draft pool, 1 + K in the draft pool (model_engine.h, KV
//    contract).
//  * A context chunk of n tokens gets n. The last chunk also proposes K drafts; the
//    draft model writes their KV, so a draft pool gets n + K (and a paired target,
//    which follows the draft, too). The n-gram drafter writes no KV: n in the target.
//  * K never reaches past the model's last position (CapDraftTokens): a request near
//    its context limit generates its last tokens with fewer drafts, down to none.
//
// Pure functions; thread-safe.
#ifndef LOCKSTEP_SPEC_DECODE_BUDGET_H_
#define LOCKSTEP_SPEC_DECODE_BUDGET_H_

#include <cstdint>

#include "kvcache/kv_types.h"

namespace lockstep::spec {

struct Grant {
  // K this piece proposes (after a last chunk) or verifies and proposes (a step).
  int32_t num_draft_tokens = 0;
  // Capacity growth of the target cache.
  int64_t target_tokens = 0;
  // Capacity growth of the draft cache (0 without a draft pool; a paired draft cache
  // follows the target and needs no growth of its own, this is what it receives).
  int64_t draft_tokens = 0;
};

// One generation step with K = `num_draft_tokens` (0: no speculation this step).
Grant GenerationGrant(int32_t num_draft_tokens, kv::DraftMode draft_pool);

// A context chunk of `chunk_tokens`; `last_chunk` proposes `num_draft_tokens` drafts.
Grant ContextGrant(int64_t chunk_tokens, bool last_chunk, int32_t num_draft_tokens,
                   kv::DraftMode draft_pool);

// `num_draft_tokens` capped by the positions a model of `max_position` positions (0: no
// limit) has left for a step whose last token sits at `position` (at most): the step
// verifies positions [position, position + 1 + K), so K <= max_position - 1 - position.
// -1 when not even K = 0 fits (position >= max_position).
int32_t CapDraftTokens(int32_t num_draft_tokens, int64_t position, int64_t max_position);

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_BUDGET_H_
