// The MTP module (mtp_module.h) as a spec::Drafter: a KV drafter that reads the
// target's last hidden states (spec_decode/drafter.h).
//
// Rows. The module's row at draft position q takes the token at q and the target's
// hidden state of q - 1 (zeros at q = 0) and predicts the token at q + 1, so its K/V
// at q depends on the tokens up to q only, as the target's does: draft blocks can be
// shared by prefix reuse like target blocks, and a context chunk writes inside itself.
// (Checkpoints index the same row by the hidden state's position; a uniform shift
// leaves attention's relative positions unchanged.)
//
// K passes per batch: pass 0 runs the module on every position the step confirmed,
// up to the newest (sampled) token, whose row gives the first draft; pass j applies
// the module to its own output (its hidden state and draft j) for draft j + 1.
//
// Collectives: every Propose makes K * module.collectives_per_forward() collective
// calls, whatever the queries (also none, as on a pad dummy's rank), so all ranks stay
// in lockstep. Passes j > 0 (one row per proposing sequence, so no more rows than the
// rank's target forward had) run under the step's vote when every rank voted and no
// rank has a context chunk (spec::StepShape: the same agreement on every rank, so an
// expert-parallel device sizes their exchanges alike and may replay a graph); pass 0
// (up to one row more per sequence than its target rows, after a seed or a restart)
// agrees its own rows.
//
// Draft KV (model_engine.h, KV contract), as the draft model's
// (draft_model_drafter.h): the pool is written only below kv_limit and holds only rows
// of confirmed tokens computed from the target's hidden states. What lies beyond (at
// most two confirmed rows; the chained rows of the drafts, recomputed from the
// target's hidden states once verified) sits in the sequence's spec buffer.
//
// Hidden states the step does not have: the first row of a context chunk needs the
// previous chunk's last hidden state, kept meanwhile by draft cache generation (at
// most kMaxPendingChunks). Where none is at hand (after a reused prefix, a draft
// prefix, the first row of a seeded generation step) the row is computed from zeros:
// that costs draft quality, never correctness.
//
// Thread-compatible: the engine thread calls it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_DRAFTER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_DRAFTER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/mtp_module.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "spec_decode/drafter.h"

namespace lockstep::engine {

class MtpDrafter final : public spec::Drafter {
 public:
  static constexpr int kMaxPendingChunks = 1024;

  // `module` (the CPU engine's MtpModule or a device's MtpModel) and `threads` (may be
  // null) are not owned and must outlive the drafter; `pool` is the draft KV pool
  // (module.layer().Layout). K = num_draft_tokens >= 1.
  MtpDrafter(const MtpModel* module, KvPoolView pool, int num_draft_tokens, ThreadPool* threads);

  spec::Method method() const override { return spec::Method::kMtp; }
  bool keeps_kv() const override { return true; }
  bool needs_target_hidden() const override { return true; }
  std::unique_ptr<spec::DraftSequenceState> NewState() const override;
  void SetStepShape(const spec::StepShape& shape) override { shape_ = shape; }
  absl::Status Propose(absl::Span<const spec::DraftQuery> queries,
                       absl::Span<std::vector<int32_t>> drafts) override;

  // Chunk-boundary hidden states held now (a test hook).
  int pending_chunks() const { return static_cast<int>(pending_.size()); }

 private:
  struct Member {
    int query = 0;
    int64_t first_row = 0;   // pass 0's first row position
    int64_t row_end = 0;     // pass 0 covers [first_row, row_end)
    int64_t next_start = 0;  // the newest token's position (history after this step)
    int64_t new_end = 0;  // the pool may hold [0, new_end) after this step
    int propose = 0;
    int last_row = -1;  // this pass's row whose logits and hidden state continue
  };
  // The target's hidden state of a context chunk's last position.
  struct Pending {
    int64_t position = 0;
    std::vector<float> hidden;
  };

  // The target's hidden state of `position` for `query` (see the top).
  const float* HiddenOf(const spec::DraftQuery& query, int64_t position) const;
  // Keeps the hidden state of `position` (a chunk's last) for the next chunk.
  void KeepPending(const spec::DraftQuery& query, int64_t position);

  const MtpModel* const module_;
  const KvPoolView pool_;
  const int num_draft_tokens_;
  ThreadPool* const threads_;
  spec::StepShape shape_;  // this step's, from the engine

  absl::flat_hash_map<uint64_t, Pending> pending_;  // by draft cache generation
  std::deque<uint64_t> pending_order_;              // oldest first (may name erased ones)
  std::vector<float> zeros_;

  Arena arena_;
  std::vector<Member> members_;
  std::vector<SequenceKv> seqs_;
  std::vector<ForwardRow> rows_;
  std::vector<int32_t> logit_rows_;
  std::vector<const float*> inputs_;  // each row's previous hidden state
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_DRAFTER_H_
