// The model engine interface: the executor launches a batch asynchronously and collects
// its sampled tokens later, so the host prepares step N+1 while step N computes (the
// overlap loop, docs/design.md §3).
//
// Engine-side sequence state. Because step N+1 is launched before the host has seen
// step N's tokens, the engine keeps, per sequence (keyed by request id and target
// cache generation), the state the next step starts from: the next position, the last
// sampled token, the pending draft proposals. A generation step continues from that
// state; the host seeds it only where the engine has none (the first step of a
// generation-only request after its KV arrived, and the pad dummy).
//
// KV contract (positions are 0-based token indices in the sequence). The host grows
// capacity for a step before launching it and shrinks it only after the step's result
// is applied, so a step may write only inside its own grant:
//  * A context chunk covering [position, position + n) writes target KV there (target
//    capacity covers position + n). With speculation by a KV drafter (K > 0; the draft
//    model or the MTP module) the drafter prefills the same chunk; after the LAST
//    chunk it may propose K drafts (the first drafts a context instance hands over),
//    writing draft KV in [P, P + K) where P is the prompt length: the draft capacity
//    covers position + n + K, and the host keeps those K draft positions allocated.
//    Where the draft KV ends before the chunk (an unpaired draft mirror that reused a
//    shorter prefix than its target), the chunk
//    carries the missing tokens (`draft_prefix`) and the draft prefills them first,
//    writing draft KV in [position - draft_prefix.size(), position) too.
//  * A generation step from history h (target KV valid for [0, h), last token at h)
//    writes target KV for [h, h + 1 + K) (last token + K drafts to verify) and draft
//    KV only below h + K: the draft first catches up on positions it has not processed
//    yet (all < h), then proposes the K drafts this step verifies (inputs at
//    h .. h + K - 1). Proposing the NEXT step's drafts at the end of this step would
//    write beyond this step's grant: do not. With a accepted drafts the new history is
//    h + 1 + a; the new last token (the bonus token) is at h + 1 + a; the host then
//    shrinks both pools by K - a, so the engine must not rely on any KV at or beyond
//    the new history (draft KV included).
//  * A seeded step (first step of a generation-only request, or the dummy) starts with
//    target AND draft KV valid for [0, seed.history) only; seed.draft_tokens (if K of
//    them) are verified as this step's drafts, otherwise the draft proposes.
//  * The engine writes nowhere else; block tables in the batch cover the capacity.
//
// Sequence identity: state is keyed by request id and target cache generation. A
// BlockRefs with a new generation for a known id (a request recomputed after a pause, the
// next pad dummy) is a new sequence: drop the old state.
//
// Ordering: batches run in launch order on the engine's own thread. A block freed by
// the host after launching batch N is reused only by batches launched later, so it is
// never written by two sequences at once.
//
// Thread safety: Launch and Collect are called from the executor thread only.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_ENGINE_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_ENGINE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "kvcache/kv_types.h"
#include "scheduler/sampling_params.h"

namespace lockstep::engine {

// One chunk of prefill. `kv` (in every step type): the sequence's block tables,
// snapshotted at launch.
struct ContextChunk {
  kv::BlockRefs kv;
  std::vector<int32_t> tokens;  // the chunk's tokens
  int64_t position = 0;         // absolute position of tokens[0]
  bool last_chunk = false;      // sample the first token (and K drafts) after this chunk
  sched::SamplingParams sampling;
  int num_draft_tokens = 0;  // K, proposals after the last chunk
  // N-gram drafting, and sampling that looks at the sequence (penalties, min_tokens),
  // last chunk only: the tokens at [0, position) (the drafter looks for matches in the
  // whole sequence).
  std::vector<int32_t> earlier_tokens;
  // Tokens of the sequence that are its prompt (the rest was generated before a
  // recompute); -1: all of them.
  int64_t prompt_length = -1;
  // A KV drafter: the tokens at [position - draft_prefix.size(), position), which the
  // draft pool does not hold yet (its KV is valid below that only). Empty: the draft KV
  // reaches `position`.
  std::vector<int32_t> draft_prefix;
};

// Where a generation step starts when the engine has no state for the sequence.
struct SequenceSeed {
  int64_t history = 0;                // KV valid for [0, history)
  int32_t last_token = 0;             // at position `history`
  std::vector<int32_t> draft_tokens;  // proposals to verify (at most K), may be empty
  // N-gram drafting and sampling that looks at the sequence: the tokens at
  // [0, history), the prompt (empty: the drafter and the penalties see only the tokens
  // from here on).
  std::vector<int32_t> tokens;
};

// One decoding step: verify up to K drafts (if any) and sample (spec_decode/acceptance.h),
// then propose up to K new drafts. K may change from step to step (dynamic K): a step
// verifies at most its own K of the drafts proposed before it.
struct GenerationStep {
  kv::BlockRefs kv;
  std::optional<SequenceSeed> seed;  // set iff the engine holds no state for kv
  int num_draft_tokens = 0;          // K of this step (0: no speculation)
  sched::SamplingParams sampling;
  bool is_dummy = false;  // pad dummy: computed like any step, result ignored
};

// What the target forwards of one step agree on across the ranks of an instance (the
// executor's step vote, runtime/executor/step_vote.h): the most rows any rank's target
// forward may have (1 + K per generation step, the tokens of each chunk), and whether
// any rank's batch has a context chunk. A device engine sizes its expert-parallel
// exchange and picks its CUDA graph bucket from it, so every rank makes the same
// collectives with the same shapes. `agreed` is false where nobody voted (one rank, a
// test host, or a forward outside the target's step such as the draft model's): the
// values are then this rank's own.
struct StepAgreement {
  int64_t max_rows = 0;
  bool any_context = true;
  bool agreed = false;
};

struct Batch {
  StepId step;
  std::vector<ContextChunk> context;
  std::vector<GenerationStep> generation;
  // Sequences whose engine-side state can be dropped before this batch runs.
  std::vector<kv::BlockRefs> released;
  // Set by the executor from the step vote.
  StepAgreement agreement;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SequenceResult {
  RequestId id;
  uint64_t generation = 0;
  // Not OK: the engine refused this sequence (a position past the model's end, a token
  // outside the vocabulary, a block table that does not cover the step, no state and no
  // seed), naming the request and why; it was left out of the forward, its engine state
  // is dropped and the fields below are empty. The batch's other sequences ran.
  absl::Status status;
  // Context (last chunk): the first sampled token. Generation: accepted drafts followed
  // by the bonus token (1 + num_accepted tokens). Empty for a non-last context chunk.
  std::vector<int32_t> tokens;
  int num_proposed = 0;  // drafts verified this step
  int num_accepted = 0;  // of those, accepted
  // Context (last chunk) with speculation: the K drafts proposed after the first token
  // (what a context instance hands over). Otherwise may be empty.
  std::vector<int32_t> next_drafts;
  // Per token in `tokens` when logprobs were requested: the chosen token's logprob,
  // then the top-n alternatives.
  std::vector<std::vector<TokenLogprob>> logprobs;
};

struct BatchResult {
  StepId step;
  std::vector<SequenceResult> sequences;  // one per context chunk and generation step
};

// What the executor needs to know about the model.
struct EngineInfo {
  int32_t vocab_size = 0;
  int32_t eos_token_id = -1;
  int64_t max_position = 0;  // longest sequence the model supports
};

class ModelEngine {
 public:
  virtual ~ModelEngine() = default;

  virtual EngineInfo info() const = 0;

  // Queues the forward of `batch`; returns at once. An invalid batch (bad block ids, a
  // missing seed) is reported by the matching Collect.
  virtual void Launch(Batch batch) = 0;

  // Waits (at most `timeout`) for the batch of `step`, which must be the oldest batch
  // not yet collected. DeadlineExceeded if it is not done in time (collect again
  // later); any other error fails the whole batch. One sequence the engine refuses
  // fails alone (SequenceResult::status).
  virtual absl::StatusOr<BatchResult> Collect(StepId step, absl::Duration timeout) = 0;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_ENGINE_H_
