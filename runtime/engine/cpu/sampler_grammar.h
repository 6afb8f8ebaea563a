// Constrained decoding on the rank that owns a request (SamplingParams::grammar): the
// sampler masks the logits with the tokens the request's grammar allows next.
//
// GrammarSource: the engine's vocabulary (each token id's bytes, grammar/
// model_vocabulary.h: the model directory's tokenizer, loaded at the first constrained
// request) and the compiled grammars, cached per (spec, vocabulary).
//
// SequenceGrammar: one sequence's grammar::Matcher and the generated tokens it has
// accepted. Its state is a pure function of those tokens: Sync brings it to exactly the
// sequence's generated tokens (rolling back to the common prefix and replaying the
// rest), so a request rebuilt elsewhere (migration, recompute, a continuation) or after
// a failed step masks exactly as the original would have.
//
// Speculative decoding: verification samples each position from the masked
// distribution (so a draft the grammar forbids is never accepted and the output is the
// constrained target's), and AllowedDrafts trims a proposal at its first forbidden
// token.
//
// Thread safety: GrammarSource is thread-safe; a SequenceGrammar belongs to the engine
// thread (which may lend it to a GrammarMaskWorker for the forward's duration).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_GRAMMAR_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_GRAMMAR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "grammar/grammar_spec.h"
#include "grammar/matcher.h"
#include "runtime/engine/cpu/sampler.h"
#include "scheduler/sampling_params.h"

namespace lockstep::engine {

class GrammarSource {
 public:
  // The vocabulary of the model in `model_dir` (of `vocab_size` ids, EOS the stop token).
  GrammarSource(std::string model_dir, int32_t vocab_size, int32_t eos_token_id);
  // A given vocabulary (tests).
  explicit GrammarSource(std::shared_ptr<const grammar::Vocabulary> vocabulary);

  // The compiled grammar of `spec`. Errors: the vocabulary cannot be loaded, or the
  // spec does not compile (InvalidArgument naming the problem).
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> Get(
      const grammar::GrammarSpec& spec);

 private:
  absl::StatusOr<std::shared_ptr<const grammar::Vocabulary>> LoadedVocabulary();

  const std::string model_dir_;
  const int32_t vocab_size_;
  const int32_t eos_token_id_;
  absl::Mutex mu_;
  std::optional<absl::StatusOr<std::shared_ptr<const grammar::Vocabulary>>> vocabulary_
      ABSL_GUARDED_BY(mu_);
  grammar::GrammarCache cache_;
};

class SequenceGrammar {
 public:
  // Brings the matcher to exactly `generated` (the sequence's generated tokens, a
  // continuation's earlier ones first), compiling `spec` on first use. Errors: the
  // spec does not compile; a generated token the grammar does not allow
  // (FailedPrecondition naming its index).
  absl::Status Sync(GrammarSource& source, const grammar::GrammarSpec& spec,
                    absl::Span<const int32_t> generated);
  // Sync to the generated tokens of `history` (a continuation's earlier output, the
  // last params.num_generated_in_prompt prompt tokens, then the output) under
  // params.grammar, which must be set.
  absl::Status SyncToHistory(GrammarSource& source, const sched::SamplingParams& params,
                             const SamplingHistory& history);
  // The tokens allowed next (valid until the state changes: Sync to other tokens,
  // Accept); empty when none may come (the grammar's dead end, or after a stop token).
  // Computed once per state: a second call returns the same mask (so a mask computed
  // during the forward, grammar_mask_worker.h, is the one the sampler uses).
  absl::Span<const uint32_t> Allowed();
  // Advances by `token`; FailedPrecondition when the grammar does not allow it.
  absl::Status Accept(int32_t token);
  // How many leading `drafts` the grammar allows from here (the state is unchanged).
  int AllowedDrafts(absl::Span<const int32_t> drafts);
  int num_accepted() const { return static_cast<int>(tokens_.size()); }

 private:
  std::optional<grammar::GrammarSpec> spec_;
  std::optional<grammar::Matcher> matcher_;
  std::vector<int32_t> tokens_;  // accepted by matcher_
  std::vector<uint32_t> mask_;
  bool mask_valid_ = false;  // mask_ is the mask of the matcher's state
  bool mask_any_ = false;    // mask_ allows some token
  std::vector<int32_t> generated_;  // SyncToHistory's scratch
};

// "the grammar reached a dead end after N generated tokens: no token may follow"
absl::Status GrammarDeadEnd(int num_generated);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_SAMPLER_GRAMMAR_H_
