// The draft model as a spec::Drafter (a KV drafter, spec_decode/drafter.h): a second
// ForwardModel with its own KV pool, whose K passes per batch catch the draft KV up on
// the tokens the step confirmed and propose up to K greedy drafts per sequence.
//
// Collectives: every Propose makes K * draft.collectives_per_forward() collective
// calls, whatever the queries (also none), so all ranks stay in lockstep.
//
// Draft KV (model_engine.h, KV contract). A step from history h with K drafts writes
// the draft pool only at positions below kv_limit (h + K; a context chunk: inside the
// chunk). Confirmed positions the draft cannot store yet (at most one, h + K when all
// K drafts are accepted) and the K/V of the draft's own proposals live in the
// sequence's spec buffer (its DraftSequenceState), and move into the pool when a
// later step confirms them and may write there. So the draft pool holds only
// confirmed tokens, and nothing the engine relies on sits at or beyond the history.
//
// Thread-compatible: the engine thread calls it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_DRAFT_MODEL_DRAFTER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_DRAFT_MODEL_DRAFTER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "spec_decode/drafter.h"

namespace lockstep::engine {

class DraftModelDrafter final : public spec::Drafter {
 public:
  // `draft` and `threads` (may be null) are not owned and must outlive the drafter;
  // `pool` is the draft KV pool. K = num_draft_tokens >= 1 passes per batch.
  DraftModelDrafter(const ForwardModel* draft, KvPoolView pool, int num_draft_tokens,
                    ThreadPool* threads);

  spec::Method method() const override { return spec::Method::kDraftModel; }
  bool keeps_kv() const override { return true; }
  std::unique_ptr<spec::DraftSequenceState> NewState() const override;
  absl::Status Propose(absl::Span<const spec::DraftQuery> queries,
                       absl::Span<std::vector<int32_t>> drafts) override;

 private:
  // One sequence of the batch the passes work on.
  struct Member {
    int query = 0;
    int64_t pool_valid = 0;  // the pool holds [0, pool_valid) before pass 0
    int64_t next_start = 0;  // the newest token's position (history after this step)
    int64_t new_end = 0;     // the pool may hold [0, new_end) after this step
    int propose = 0;
  };

  const ForwardModel* const draft_;
  const KvPoolView pool_;
  const int num_draft_tokens_;
  ThreadPool* const threads_;

  Arena arena_;
  // Per-Propose scratch, kept for its capacity.
  std::vector<Member> members_;
  std::vector<SequenceKv> seqs_;
  std::vector<ForwardRow> rows_;
  std::vector<int32_t> logit_rows_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_DRAFT_MODEL_DRAFTER_H_
