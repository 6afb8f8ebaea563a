#include "runtime/engine/cpu/sampler_grammar.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grammar/model_vocabulary.h"

namespace lockstep::engine {

GrammarSource::GrammarSource(std::string model_dir, int32_t vocab_size, int32_t eos_token_id)
    : model_dir_(std::move(model_dir)), vocab_size_(vocab_size), eos_token_id_(eos_token_id) {}

GrammarSource::GrammarSource(std::shared_ptr<const grammar::Vocabulary> vocabulary)
    : vocab_size_(static_cast<int32_t>(vocabulary->token_bytes.size())),
      eos_token_id_(-1),
      vocabulary_(std::move(vocabulary)) {}

absl::StatusOr<std::shared_ptr<const grammar::Vocabulary>> GrammarSource::LoadedVocabulary() {
  absl::MutexLock lock(&mu_);
  if (!vocabulary_.has_value()) {
    // Loaded once; a failure is kept too (every constrained request names it).
    vocabulary_ = grammar::LoadModelVocabulary(model_dir_, vocab_size_, eos_token_id_);
  }
  if (!vocabulary_->ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("constrained decoding needs the model's vocabulary: ",
                     vocabulary_->status().message()));
  }
  return *vocabulary_;
}

absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> GrammarSource::Get(
    const grammar::GrammarSpec& spec) {
  absl::StatusOr<std::shared_ptr<const grammar::Vocabulary>> vocabulary = LoadedVocabulary();
  if (!vocabulary.ok()) return vocabulary.status();
  return cache_.Get(spec, *std::move(vocabulary));
}

absl::Status SequenceGrammar::Sync(GrammarSource& source, const grammar::GrammarSpec& spec,
                                   absl::Span<const int32_t> generated) {
  if (!matcher_.has_value() || !spec_.has_value() || !(*spec_ == spec)) {
    absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled = source.Get(spec);
    if (!compiled.ok()) return compiled.status();
    matcher_.emplace(*std::move(compiled));
    spec_ = spec;
    tokens_.clear();
    mask_valid_ = false;
  }
  // Keep the common prefix, undo the rest, replay what is new.
  const size_t common =
      std::mismatch(tokens_.begin(), tokens_.end(), generated.begin(), generated.end()).first -
      tokens_.begin();
  if (common < tokens_.size() || common < generated.size()) mask_valid_ = false;
  matcher_->Rollback(static_cast<int>(tokens_.size() - common));
  tokens_.resize(common);
  for (size_t i = common; i < generated.size(); ++i) {
    if (!matcher_->AcceptToken(generated[i])) {
      return absl::FailedPreconditionError(
          absl::StrCat("generated token ", i, " (id ", generated[i],
                       ") does not match the request's grammar"));
    }
    tokens_.push_back(generated[i]);
  }
  return absl::OkStatus();
}

absl::Status SequenceGrammar::SyncToHistory(GrammarSource& source,
                                             const sched::SamplingParams& params,
                                             const SamplingHistory& history) {
  const size_t earlier = std::min(static_cast<size_t>(std::max(params.num_generated_in_prompt, 0)),
                                  history.prompt.size());
  generated_.assign(history.prompt.end() - earlier, history.prompt.end());
  generated_.insert(generated_.end(), history.output.begin(), history.output.end());
  generated_.insert(generated_.end(), history.pending.begin(), history.pending.end());
  return Sync(source, *params.grammar, generated_);
}

absl::Span<const uint32_t> SequenceGrammar::Allowed() {
  if (!mask_valid_) {
    mask_.assign(grammar::MaskWords(matcher_->vocabulary()), 0);
    matcher_->FillNextTokenMask(absl::MakeSpan(mask_));
    mask_any_ = std::any_of(mask_.begin(), mask_.end(), [](uint32_t w) { return w != 0; });
    mask_valid_ = true;
  }
  return mask_any_ ? absl::MakeConstSpan(mask_) : absl::Span<const uint32_t>();
}

absl::Status SequenceGrammar::Accept(int32_t token) {
  if (!matcher_->AcceptToken(token)) {
    return absl::FailedPreconditionError(
        absl::StrCat("token ", token, " does not match the request's grammar"));
  }
  tokens_.push_back(token);
  mask_valid_ = false;
  return absl::OkStatus();
}

int SequenceGrammar::AllowedDrafts(absl::Span<const int32_t> drafts) {
  int n = 0;
  while (n < static_cast<int>(drafts.size()) && matcher_->AcceptToken(drafts[n])) ++n;
  matcher_->Rollback(n);
  return n;
}

absl::Status GrammarDeadEnd(int num_generated) {
  return absl::FailedPreconditionError(
      absl::StrCat("the grammar reached a dead end after ", num_generated,
                   " generated tokens: no token may follow"));
}

}  // namespace lockstep::engine
