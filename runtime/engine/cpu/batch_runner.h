// Runs one Batch (model_engine.h) on the target model and, with speculation, a drafter
// (the target is a ForwardModel, forward_model.h: the CPU transformer or a device's):
// one target forward over every context chunk and generation step (each step
// verifying its drafts), sampling and acceptance (spec_decode/acceptance.h), then one
// spec::Drafter call for the proposals of the next step: a token drafter (n-gram) on
// each proposing sequence's tokens, or a KV drafter (the draft model,
// draft_model_drafter.h; or the MTP module, mtp_drafter.h, which also reads the
// target's last hidden states of the step) on every sequence with draft KV, whose K
// passes also catch its KV up.
//
// Collectives: every Run makes target.collectives_per_forward() collective calls and
// the drafter's (the draft model: K * draft.collectives_per_forward()), in the same
// order, whatever the batch holds, even when the batch is empty or invalid (then the
// forward and the drafter run with no rows and the error is returned afterwards), so
// all ranks stay in lockstep.
//
// Speculative decoding (docs/design.md §6). A step verifies the drafts proposed at the
// end of the previous step (or the seed's; a seed without drafts: none this step) and
// ends by proposing the next step's. Verification samples the target token of every
// verified position with the request's own counter-based draw and accepts a draft iff
// it equals that token. For greedy requests this is exact-match acceptance; for
// stochastic ones it is rejection sampling with a deterministic proposal (accept d
// with probability p(d), else draw from p without d), so the output distribution is
// exactly the target's, and speculative output equals non-speculative output token
// for token for every seed.
//
// Draft KV (model_engine.h, KV contract): the runner checks each sequence's draft
// block table and hands the drafter its grant (kv_limit: a step from history h with K
// drafts may write the draft pool only below h + K; a context chunk only inside the
// chunk and the draft prefix before it); the drafter keeps what lies beyond in its per-sequence state
// (draft_model_drafter.h).
//
// Thread-compatible: owned by the engine thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_BATCH_RUNNER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_BATCH_RUNNER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/grammar_mask_worker.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/sampler.h"
#include "runtime/engine/cpu/sampler_grammar.h"
#include "runtime/engine/model_engine.h"
#include "spec_decode/drafter.h"

namespace lockstep::engine {

// Where a sequence's next generation step starts (model_engine.h, sequence state).
struct SequenceState {
  uint64_t generation = 0;      // target cache generation the state belongs to
  int64_t history = 0;          // target (and draft pool) KV valid for [0, history)
  int32_t last_token = 0;       // at position `history`
  std::vector<int32_t> drafts;  // proposals for positions history + 1, ...
  // A KV drafter's state of the sequence (spec::Drafter::NewState), or null.
  std::unique_ptr<spec::DraftSequenceState> drafter_state;
  // With a token drafter, or sampling that looks at the sequence: the tokens at
  // [0, history] (the last is last_token), of which the first prompt_length are the
  // prompt.
  std::vector<int32_t> tokens;
  int64_t prompt_length = 0;
  // A constrained request's matcher (sampler_grammar.h), or null. Shared only with the
  // mask worker's job of the step in flight (grammar_mask_worker.h).
  std::shared_ptr<SequenceGrammar> grammar;
};

class BatchRunner {
 public:
  // `drafter` proposes up to num_draft_tokens (the largest K) drafts per step; null
  // (or K = 0): no speculation. `draft_pool` is a KV drafter's pool, whose block
  // tables the runner checks. Pointers are not owned and must outlive the runner;
  // `threads` may be null.
  BatchRunner(const ForwardModel* target, KvPoolView target_pool, spec::Drafter* drafter,
              KvPoolView draft_pool, int num_draft_tokens, ThreadPool* threads);

  // Runs `batch`. A sequence with invalid input (a token outside the vocabulary,
  // positions past the model's end, a block table that does not cover the positions,
  // an unknown block, a generation step without state or seed) is refused alone: left
  // out of the forward and the drafter, its state dropped, its SequenceResult::status
  // InvalidArgument naming the request and why; the others run. A batch naming one
  // request twice fails whole (InvalidArgument); a Communicator error is returned as is.
  absl::StatusOr<BatchResult> Run(const Batch& batch);

  // Constrained decoding (SamplingParams::grammar): masks from `source` (not owned, must
  // outlive the runner). Without one, a constrained request is refused. A sequence whose
  // grammar does not compile or reaches a dead end is refused (SequenceResult::status
  // FailedPrecondition or InvalidArgument naming why) after the forward.
  void set_grammar_source(GrammarSource* source) { grammars_ = source; }
  // Whether the mask of each constrained sequence's first sampled position is computed
  // on the mask worker while the target forward runs (default) or after it on this
  // thread. The sampled tokens are the same either way.
  void set_mask_overlap(bool overlap) { overlap_masks_ = overlap; }
  const GrammarMaskWorker& mask_worker() const { return mask_worker_; }

 private:
  // (request id, target cache generation). One state per request id: a new
  // generation for a known id is a new sequence and replaces the old state.
  using Key = std::pair<int64_t, uint64_t>;

  // The work of one sequence in this batch. Kept in a vector that only grows, so
  // its buffers are reused from step to step.
  struct SeqWork {
    bool context = false;
    bool dummy = false;
    int index = 0;  // into batch.context or batch.generation
    Key key;
    const kv::BlockRefs* kv = nullptr;
    const sched::SamplingParams* sampling = nullptr;
    bool last_chunk = false;  // context: sample after this chunk
    // Where the target rows start: the chunk position, or the step's history.
    int64_t start = 0;
    int32_t last_token = 0;       // generation: the token at `start`
    std::vector<int32_t> drafts;  // generation: the drafts verified (size `verify`)
    int verify = 0;
    int64_t draft_limit = 0;         // the draft pool may be written below this position
    bool restart = false;            // the draft KV is valid for [0, start) only
    int propose = 0;                 // drafts to propose after this step
    bool draft_kv = false;           // the KV drafter keeps KV for this sequence
    std::vector<int32_t> confirmed;  // a KV drafter's tokens of this step, from `start`
    int first_row = 0;               // in the target forward
    int num_rows = 0;
    int first_logit = -1;            // in the target logits (-1: none)
    SequenceState* state = nullptr;  // the state this step continues or creates
    // Not OK: the sequence is refused (Run); nothing else of it is used.
    absl::Status refused;
    // Outcome.
    std::vector<int32_t> tokens;  // sampled (context) or accepted + bonus (generation)
    int accepted = 0;
    int64_t next_start = 0;  // history after this step (position of tokens.back())
  };

  // Validates the batch and fills work_[0, num_work_); creates missing states. A
  // sequence that fails validation is refused (SeqWork::refused), not the batch.
  absl::Status Plan(const Batch& batch);
  absl::Status PlanContext(const ContextChunk& chunk, SeqWork& work);
  absl::Status PlanGeneration(const GenerationStep& step, SeqWork& work);
  absl::Status CheckCoverage(const SeqWork& work, const std::vector<BlockId>& blocks,
                             const KvPoolView& pool, int64_t end, const char* pool_name) const;
  // The state of `key`, created (replacing one of an older generation) if needed.
  SequenceState& StateFor(const Key& key);
  // The state of `key`, or null (also when the id's state has another generation).
  SequenceState* FindState(const Key& key);
  void EraseState(const Key& key);
  // One target forward over every sequence (or none); returns the logits.
  absl::StatusOr<const float*> TargetForward(const Batch& batch, bool empty);
  // Brings every constrained sequence that samples this step to its tokens and hands
  // the computation of its next mask to the mask worker (to run during the forward).
  void StartMasks(const Batch& batch);
  // Sampling and acceptance from the target logits.
  void Accept(const Batch& batch, const float* logits);
  // The sequence's grammar brought to its generated tokens (null: unconstrained).
  absl::StatusOr<SequenceGrammar*> SyncGrammar(const SeqWork& work,
                                               const SamplingHistory& history);
  // Refuses a sequence after the forward (nothing of this step is kept).
  void RefuseSampled(SeqWork& work, absl::Status status);
  // The sequence's tokens before this step (into history_tokens_) and the sampling
  // history over them, for work that samples with penalties or min_tokens.
  SamplingHistory HistoryOf(const Batch& batch, const SeqWork& work);
  // Keeps SequenceState::tokens (and prompt_length) up to date with this step's tokens,
  // for the token drafter and the penalties.
  void ExtendTokens(const Batch& batch);
  // The drafter's proposals for the next step (with no queries when `empty`).
  absl::Status Drafts(const Batch& batch, bool empty);
  BatchResult Results(const Batch& batch, const float* logits);
  // Drops every state this Run created or touched (after a failure).
  void ForgetBatchStates();

  const ForwardModel* const target_;
  const KvPoolView target_pool_;
  spec::Drafter* const drafter_;  // null: no speculation
  const KvPoolView draft_pool_;
  const int num_draft_tokens_;
  ThreadPool* const threads_;
  const bool kv_drafter_;     // drafter_ keeps KV (the draft model)
  const bool token_drafter_;  // drafter_ reads each sequence's tokens (n-gram)
  GrammarSource* grammars_ = nullptr;
  bool overlap_masks_ = true;
  GrammarMaskWorker mask_worker_;

  absl::node_hash_map<int64_t, SequenceState> states_;  // by request id
  Arena arena_;
  // Per-Run scratch, kept for its capacity.
  std::vector<SeqWork> work_;
  int num_work_ = 0;
  std::vector<Key> created_;
  std::vector<ForwardRow> rows_;
  std::vector<SequenceKv> seqs_;
  std::vector<int32_t> logit_rows_;
  std::vector<int64_t> batch_ids_;       // request ids in this batch (duplicate check)
  std::vector<int32_t> history_tokens_;  // HistoryOf's scratch
  std::vector<spec::DraftQuery> queries_;
  std::vector<int> query_work_;  // queries_[q] belongs to work_[query_work_[q]]
  std::vector<std::vector<int32_t>> proposals_;
  // The target's last hidden states of this Run's rows (in arena_), for a drafter that
  // reads them (MTP); null otherwise.
  float* target_hidden_ = nullptr;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_BATCH_RUNNER_H_
