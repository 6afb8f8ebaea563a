#include "runtime/engine/cpu/batch_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/engine/cpu/sampler.h"
#include "spec_decode/acceptance.h"

namespace lockstep::engine {
namespace {

absl::Status BadRequest(const kv::BlockRefs& kv, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("request ", kv.id.value(), " (cache generation ",
                                                 kv.generation, "): ", problem));
}

// Every token of `tokens` (named `what` in the error) is in the vocabulary.
absl::Status CheckVocabulary(const kv::BlockRefs& kv, const std::vector<int32_t>& tokens,
                             int32_t vocab_size, absl::string_view what) {
  for (int32_t token : tokens) {
    if (token < 0 || token >= vocab_size) {
      return BadRequest(
          kv, absl::StrCat(what, " ", token, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

BatchRunner::BatchRunner(const ForwardModel* target, KvPoolView target_pool, spec::Drafter* drafter,
                         KvPoolView draft_pool, int num_draft_tokens, ThreadPool* threads)
    : target_(target),
      target_pool_(target_pool),
      drafter_(num_draft_tokens > 0 ? drafter : nullptr),
      draft_pool_(draft_pool),
      num_draft_tokens_(drafter_ == nullptr ? 0 : num_draft_tokens),
      threads_(threads),
      kv_drafter_(drafter_ != nullptr && drafter_->keeps_kv()),
      token_drafter_(drafter_ != nullptr && !kv_drafter_) {}

absl::StatusOr<BatchResult> BatchRunner::Run(const Batch& batch) {
  arena_.Reset();
  for (const kv::BlockRefs& kv : batch.released) EraseState(Key{kv.id.value(), kv.generation});
  created_.clear();
  absl::Status status = Plan(batch);
  const bool empty = !status.ok();
  if (!empty) StartMasks(batch);
  // From here on every rank makes the same collectives, whatever happened above.
  absl::StatusOr<const float*> logits = TargetForward(batch, empty);
  const absl::Status masks = mask_worker_.Finish();  // the grammars are ours again
  if (status.ok() && !logits.ok()) status = logits.status();
  if (status.ok()) status = masks;
  if (status.ok()) Accept(batch, *logits);
  if (status.ok()) ExtendTokens(batch);
  absl::Status draft_status = Drafts(batch, !status.ok());
  if (status.ok()) status = draft_status;
  if (!status.ok()) {
    ForgetBatchStates();
    return status;
  }
  return Results(batch, *logits);
}

void BatchRunner::ForgetBatchStates() {
  for (const Key& key : created_) EraseState(key);
  for (int i = 0; i < num_work_; ++i) EraseState(work_[i].key);
  num_work_ = 0;
}

SequenceState* BatchRunner::FindState(const Key& key) {
  auto it = states_.find(key.first);
  if (it == states_.end() || it->second.generation != key.second) return nullptr;
  return &it->second;
}

void BatchRunner::EraseState(const Key& key) {
  if (FindState(key) != nullptr) states_.erase(key.first);
}

SequenceState& BatchRunner::StateFor(const Key& key) {
  if (SequenceState* state = FindState(key)) return *state;
  SequenceState& state = states_[key.first];
  state = SequenceState();
  state.generation = key.second;
  created_.push_back(key);
  if (drafter_ != nullptr) state.drafter_state = drafter_->NewState();
  return state;
}

absl::Status BatchRunner::CheckCoverage(const SeqWork& work, const std::vector<BlockId>& blocks,
                                        const KvPoolView& pool, int64_t end,
                                        const char* pool_name) const {
  const int64_t needed = pool.layout.BlocksFor(end);
  if (static_cast<int64_t>(blocks.size()) < needed) {
    return BadRequest(*work.kv,
                      absl::StrCat("the ", pool_name, " block table holds ", blocks.size(),
                                   " blocks; positions up to ", end, " need ", needed));
  }
  for (int64_t b = 0; b < needed; ++b) {
    if (blocks[b].value() < 0 || blocks[b].value() >= pool.num_blocks) {
      return BadRequest(*work.kv,
                        absl::StrCat(pool_name, " block id ", blocks[b].value(),
                                     " is outside the pool of ", pool.num_blocks, " blocks"));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchRunner::PlanContext(const ContextChunk& chunk, SeqWork& work) {
  const ModelConfig& config = target_->config();
  const int64_t n = static_cast<int64_t>(chunk.tokens.size());
  if (n == 0) return BadRequest(chunk.kv, "empty context chunk");
  RETURN_IF_ERROR(CheckVocabulary(chunk.kv, chunk.tokens, config.vocab_size, "token"));
  if (chunk.position < 0 || chunk.position + n > config.max_position) {
    return BadRequest(chunk.kv,
                      absl::StrCat("chunk [", chunk.position, ", ", chunk.position + n,
                                   ") exceeds the model's ", config.max_position, " positions"));
  }
  RETURN_IF_ERROR(CheckCoverage(work, chunk.kv.blocks, target_pool_, chunk.position + n, "target"));
  work.draft_kv = kv_drafter_ && chunk.kv.draft_generation != 0;
  if (work.draft_kv) {
    RETURN_IF_ERROR(
        CheckCoverage(work, chunk.kv.draft_blocks, draft_pool_, chunk.position + n, "draft"));
    if (static_cast<int64_t>(chunk.draft_prefix.size()) > chunk.position) {
      return BadRequest(chunk.kv, absl::StrCat("a draft prefix of ", chunk.draft_prefix.size(),
                                               " tokens before position ", chunk.position));
    }
    RETURN_IF_ERROR(
        CheckVocabulary(chunk.kv, chunk.draft_prefix, config.vocab_size, "draft prefix token"));
  }
  work.sampling = &chunk.sampling;
  work.start = chunk.position;
  work.restart = true;  // earlier chunks are in the draft pool, nothing beyond
  work.draft_limit = chunk.position + n;
  work.last_chunk = chunk.last_chunk;
  work.propose = (work.draft_kv || token_drafter_) && chunk.last_chunk
                     ? std::clamp(chunk.num_draft_tokens, 0, num_draft_tokens_)
                     : 0;
  if (chunk.last_chunk) work.state = &StateFor(work.key);
  return absl::OkStatus();
}

absl::Status BatchRunner::PlanGeneration(const GenerationStep& step, SeqWork& work) {
  const ModelConfig& config = target_->config();
  if (step.seed.has_value()) {
    work.start = step.seed->history;
    work.last_token = step.seed->last_token;
    work.drafts.assign(step.seed->draft_tokens.begin(), step.seed->draft_tokens.end());
    work.restart = true;  // a seed brings draft KV for [0, history)
  } else {
    const SequenceState* found = FindState(work.key);
    if (found == nullptr) return BadRequest(step.kv, "no engine state and no seed");
    const SequenceState& state = *found;
    work.start = state.history;
    work.last_token = state.last_token;
    work.drafts.assign(state.drafts.begin(), state.drafts.end());
  }
  work.verify = std::clamp(step.num_draft_tokens, 0, static_cast<int>(work.drafts.size()));
  work.drafts.resize(work.verify);
  RETURN_IF_ERROR(CheckVocabulary(step.kv, {work.last_token}, config.vocab_size, "last token"));
  RETURN_IF_ERROR(CheckVocabulary(step.kv, work.drafts, config.vocab_size, "draft token"));
  const int64_t end = work.start + 1 + work.verify;
  if (work.start < 0 || end > config.max_position) {
    return BadRequest(step.kv, absl::StrCat("positions [", work.start, ", ", end,
                                            ") exceed the model's ", config.max_position));
  }
  RETURN_IF_ERROR(CheckCoverage(work, step.kv.blocks, target_pool_, end, "target"));
  work.draft_kv = kv_drafter_ && step.kv.draft_generation != 0;
  if (work.draft_kv) {
    RETURN_IF_ERROR(CheckCoverage(work, step.kv.draft_blocks, draft_pool_, end, "draft"));
  }
  work.draft_limit = work.start + std::max(step.num_draft_tokens, 0);
  work.sampling = &step.sampling;
  work.dummy = step.is_dummy;
  work.propose =
      work.draft_kv || token_drafter_ ? std::clamp(step.num_draft_tokens, 0, num_draft_tokens_) : 0;
  work.state = &StateFor(work.key);
  return absl::OkStatus();
}

absl::Status BatchRunner::Plan(const Batch& batch) {
  num_work_ = 0;
  batch_ids_.clear();
  for (const ContextChunk& chunk : batch.context) batch_ids_.push_back(chunk.kv.id.value());
  for (const GenerationStep& step : batch.generation) batch_ids_.push_back(step.kv.id.value());
  std::sort(batch_ids_.begin(), batch_ids_.end());
  const auto duplicate = std::adjacent_find(batch_ids_.begin(), batch_ids_.end());
  if (duplicate != batch_ids_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", *duplicate, " appears twice in the batch"));
  }
  auto next = [&](const kv::BlockRefs& kv, bool context, int index) -> SeqWork* {
    if (num_work_ == static_cast<int>(work_.size())) work_.emplace_back();
    SeqWork& work = work_[num_work_++];
    work.context = context;
    work.dummy = false;
    work.index = index;
    work.key = Key{kv.id.value(), kv.generation};
    work.kv = &kv;
    work.last_chunk = false;
    work.last_token = 0;
    work.drafts.clear();
    work.verify = work.propose = work.accepted = 0;
    work.draft_limit = 0;
    work.draft_kv = work.restart = false;
    work.state = nullptr;
    work.refused = absl::OkStatus();
    work.tokens.clear();
    return &work;
  };
  // One sequence's invalid input refuses that sequence only: it takes no part in this
  // batch and its state (the request is failed by the host) is dropped.
  auto refuse = [&](SeqWork& work, absl::Status status) {
    if (status.ok()) return;
    work.refused = std::move(status);
    work.state = nullptr;
    work.draft_kv = false;
    work.verify = work.propose = 0;
    EraseState(work.key);
  };
  for (int i = 0; i < static_cast<int>(batch.context.size()); ++i) {
    SeqWork& work = *next(batch.context[i].kv, true, i);
    refuse(work, PlanContext(batch.context[i], work));
  }
  for (int i = 0; i < static_cast<int>(batch.generation.size()); ++i) {
    SeqWork& work = *next(batch.generation[i].kv, false, i);
    refuse(work, PlanGeneration(batch.generation[i], work));
  }
  int row = 0;
  int logit = 0;
  for (int i = 0; i < num_work_; ++i) {
    SeqWork& work = work_[i];
    work.first_row = row;
    if (!work.refused.ok()) {
      work.num_rows = 0;
      work.first_logit = -1;
    } else if (work.context) {
      work.num_rows = static_cast<int>(batch.context[work.index].tokens.size());
      work.first_logit = work.last_chunk ? logit : -1;
      logit += work.last_chunk ? 1 : 0;
    } else {
      work.num_rows = 1 + work.verify;
      work.first_logit = logit;
      logit += work.num_rows;
    }
    row += work.num_rows;
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> BatchRunner::TargetForward(const Batch& batch, bool empty) {
  rows_.clear();
  seqs_.clear();
  logit_rows_.clear();
  for (int i = 0; !empty && i < num_work_; ++i) {
    const SeqWork& work = work_[i];
    if (!work.refused.ok()) continue;
    const int32_t seq = static_cast<int32_t>(seqs_.size());
    seqs_.push_back(SequenceKv{absl::MakeConstSpan(work.kv->blocks)});
    for (int j = 0; j < work.num_rows; ++j) {
      const int32_t token = work.context ? batch.context[work.index].tokens[j]
                            : j == 0     ? work.last_token
                                         : work.drafts[j - 1];
      rows_.push_back({token, work.start + j, seq});
    }
    if (work.first_logit >= 0) {
      const int first = work.context ? work.num_rows - 1 : 0;
      for (int j = first; j < work.num_rows; ++j) logit_rows_.push_back(work.first_row + j);
    }
  }
  StepAgreement agreement = batch.agreement;
  if (!agreement.agreed) {
    agreement.max_rows = static_cast<int64_t>(rows_.size());
    agreement.any_context = !batch.context.empty();
  }
  ForwardInput input{rows_, seqs_, logit_rows_, agreement};
  target_hidden_ = nullptr;
  if (drafter_ != nullptr && drafter_->needs_target_hidden()) {  // MTP reads them
    target_hidden_ = arena_.Alloc<float>((rows_.size() + 1) * target_->config().hidden_size);
    input.hidden_out = target_hidden_;
  }
  return target_->Forward(input, target_pool_, arena_, threads_);
}

SamplingHistory BatchRunner::HistoryOf(const Batch& batch, const SeqWork& work) {
  std::vector<int32_t>& tokens = history_tokens_;
  int64_t prompt_length = 0;
  if (work.context) {
    const ContextChunk& chunk = batch.context[work.index];
    tokens = chunk.earlier_tokens;
    tokens.insert(tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
    prompt_length = chunk.prompt_length >= 0 ? chunk.prompt_length : tokens.size();
  } else if (const std::optional<SequenceSeed>& seed = batch.generation[work.index].seed) {
    // The seed's history is the prompt (its tokens, when the host sent them).
    tokens = seed->tokens;
    prompt_length = static_cast<int64_t>(tokens.size());
    tokens.push_back(seed->last_token);
  } else {
    tokens = work.state->tokens;
    prompt_length = work.state->prompt_length;
  }
  prompt_length = std::min<int64_t>(prompt_length, tokens.size());
  const absl::Span<const int32_t> all(tokens);
  return SamplingHistory{all.subspan(0, prompt_length),
                         all.subspan(prompt_length),
                         {},
                         target_->config().eos_token_id};
}

void BatchRunner::Accept(const Batch& batch, const float* logits) {
  const int vocab = target_->config().vocab_size;
  for (int i = 0; i < num_work_; ++i) {
    SeqWork& work = work_[i];
    if (!work.refused.ok()) continue;
    SamplingHistory history;
    if (work.sampling->UsesHistory() && (!work.context || work.last_chunk)) {
      history = HistoryOf(batch, work);
    }
    if (work.context && !work.last_chunk) {
      work.next_start = work.start + work.num_rows;
      continue;
    }
    absl::StatusOr<SequenceGrammar*> grammar = SyncGrammar(work, history);
    if (!grammar.ok()) {
      RefuseSampled(work, grammar.status());
      continue;
    }
    // The token at `position` from logit row `row`: with a grammar, among the tokens it
    // allows (-1: none, a dead end).
    auto sample = [&](int row, int64_t position) -> int32_t {
      if (*grammar != nullptr) {
        history.allowed = (*grammar)->Allowed();
        if (history.allowed.empty()) return -1;
      }
      const int32_t token = SampleToken(logits + static_cast<size_t>(row) * vocab, vocab,
                                        *work.sampling, position, arena_, history);
      if (*grammar != nullptr && (token < 0 || !(*grammar)->Accept(token).ok())) return -1;
      return token;
    };
    if (work.context) {
      work.next_start = work.start + work.num_rows;
      work.tokens.push_back(sample(work.first_logit, work.next_start));
    } else {
      // Sample the verified positions with the request's own draw, as far as the drafts
      // are accepted; each position sees the tokens accepted before it.
      work.accepted = spec::AcceptDrafts(work.drafts, [&](int j) {
                        history.pending = absl::MakeConstSpan(work.tokens);
                        work.tokens.push_back(sample(work.first_logit + j, work.start + 1 + j));
                        return work.tokens.back();
                      }).accepted;
      work.next_start = work.start + 1 + work.accepted;
    }
    if (work.tokens.back() < 0) {
      RefuseSampled(work, GrammarDeadEnd((*grammar)->num_accepted()));
    }
  }
}

void BatchRunner::StartMasks(const Batch& batch) {
  if (!overlap_masks_ || grammars_ == nullptr) return;
  auto grammars = std::make_shared<std::vector<std::shared_ptr<SequenceGrammar>>>();
  for (int i = 0; i < num_work_; ++i) {
    const SeqWork& work = work_[i];
    // A sequence that samples: the last context chunk or a generation step.
    if (!work.refused.ok() || work.state == nullptr || !work.sampling->grammar.has_value()) {
      continue;
    }
    // An error here comes again in Accept, which refuses the sequence.
    if (!SyncGrammar(work, HistoryOf(batch, work)).ok()) continue;
    grammars->push_back(work.state->grammar);
  }
  const int n = static_cast<int>(grammars->size());
  mask_worker_.Start(n, [grammars = std::move(grammars)](int i) { (*grammars)[i]->Allowed(); });
}

absl::StatusOr<SequenceGrammar*> BatchRunner::SyncGrammar(const SeqWork& work,
                                                           const SamplingHistory& history) {
  if (!work.sampling->grammar.has_value() || work.state == nullptr) return nullptr;
  if (grammars_ == nullptr) {
    return absl::FailedPreconditionError("this engine has no vocabulary for constrained decoding");
  }
  std::shared_ptr<SequenceGrammar>& grammar = work.state->grammar;
  if (grammar == nullptr) grammar = std::make_shared<SequenceGrammar>();
  RETURN_IF_ERROR(grammar->SyncToHistory(*grammars_, *work.sampling, history));
  return grammar.get();
}

void BatchRunner::RefuseSampled(SeqWork& work, absl::Status status) {
  work.refused = absl::Status(status.code(), absl::StrCat("request ", work.key.first, ": ",
                                                          status.message()));
  work.tokens.clear();
  work.state = nullptr;
  work.draft_kv = false;
  work.verify = work.propose = work.accepted = 0;
  EraseState(work.key);
}

void BatchRunner::ExtendTokens(const Batch& batch) {
  for (int i = 0; i < num_work_; ++i) {
    SeqWork& work = work_[i];
    if (work.state == nullptr) continue;  // a non-last context chunk
    if (!token_drafter_ && !work.sampling->UsesHistory()) continue;
    std::vector<int32_t>& tokens = work.state->tokens;
    if (work.context) {
      const ContextChunk& chunk = batch.context[work.index];
      tokens = chunk.earlier_tokens;
      tokens.insert(tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
      work.state->prompt_length = chunk.prompt_length >= 0 ? chunk.prompt_length : tokens.size();
    } else if (const std::optional<SequenceSeed>& seed = batch.generation[work.index].seed) {
      tokens = seed->tokens;
      work.state->prompt_length = static_cast<int64_t>(tokens.size());
      tokens.push_back(seed->last_token);
    }
    tokens.insert(tokens.end(), work.tokens.begin(), work.tokens.end());
  }
}

absl::Status BatchRunner::Drafts(const Batch& batch, bool empty) {
  if (drafter_ == nullptr) return absl::OkStatus();
  queries_.clear();
  query_work_.clear();
  for (int i = 0; !empty && i < num_work_; ++i) {
    SeqWork& work = work_[i];
    spec::DraftQuery query;
    query.max_drafts = work.propose;
    if (kv_drafter_) {
      // Every sequence with draft KV, with the tokens from `start` on.
      if (!work.draft_kv) continue;
      std::vector<int32_t>& tokens = work.confirmed;
      query.first_position = work.start;
      if (work.context) {
        // The draft first catches up on the tokens its pool lacks before the chunk.
        const ContextChunk& chunk = batch.context[work.index];
        tokens = chunk.draft_prefix;
        tokens.insert(tokens.end(), chunk.tokens.begin(), chunk.tokens.end());
        query.first_position -= static_cast<int64_t>(chunk.draft_prefix.size());
      } else {
        tokens.assign(1, work.last_token);
      }
      tokens.insert(tokens.end(), work.tokens.begin(), work.tokens.end());
      query.tokens = tokens;
      query.ends_with_sampled = !work.tokens.empty();
      query.kv_generation = work.kv->draft_generation;
      query.kv_blocks = work.kv->draft_blocks;
      query.kv_limit = work.draft_limit;
      query.restart = work.restart;
      query.state = work.state == nullptr ? nullptr : work.state->drafter_state.get();
      if (target_hidden_ != nullptr) {
        query.target_hidden =
            target_hidden_ + static_cast<size_t>(work.first_row) * target_->config().hidden_size;
        query.hidden_first_position = work.start;
        query.hidden_rows = work.num_rows;
      }
    } else {
      // The proposing sequences, with their tokens (ExtendTokens filled them).
      if (work.state == nullptr || work.propose == 0) continue;
      query.tokens = work.state->tokens;
    }
    queries_.push_back(query);
    query_work_.push_back(i);
  }
  proposals_.resize(queries_.size());
  drafter_->SetStepShape(
      {batch.agreement.agreed, batch.agreement.any_context, batch.agreement.max_rows});
  RETURN_IF_ERROR(drafter_->Propose(queries_, absl::MakeSpan(proposals_.data(), queries_.size())));
  for (size_t q = 0; q < queries_.size(); ++q) {
    SeqWork& work = work_[query_work_[q]];
    if (work.state == nullptr) continue;  // a non-last context chunk
    std::vector<int32_t>& drafts = proposals_[q];
    if (static_cast<int>(drafts.size()) > queries_[q].max_drafts) {
      drafts.resize(queries_[q].max_drafts);
    }
    work.state->drafts.swap(drafts);
    // A constrained sequence's proposal stops before its first token the grammar forbids.
    if (work.state->grammar != nullptr && !kv_drafter_) {
      work.state->drafts.resize(work.state->grammar->AllowedDrafts(work.state->drafts));
    }
  }
  return absl::OkStatus();
}

BatchResult BatchRunner::Results(const Batch& batch, const float* logits) {
  const int vocab = target_->config().vocab_size;
  BatchResult result;
  result.step = batch.step;
  result.sequences.reserve(num_work_);
  for (int i = 0; i < num_work_; ++i) {
    SeqWork& work = work_[i];
    SequenceResult& out = result.sequences.emplace_back();
    out.id = work.kv->id;
    out.generation = work.kv->generation;
    if (!work.refused.ok()) {
      out.status = work.refused;
      continue;
    }
    out.tokens = work.tokens;
    out.num_proposed = work.verify;
    out.num_accepted = work.accepted;
    if (work.sampling->logprobs > 0) {
      for (size_t j = 0; j < work.tokens.size(); ++j) {
        out.logprobs.push_back(
            TokenLogprobs(logits + static_cast<size_t>(work.first_logit + j) * vocab, vocab,
                          work.tokens[j], work.sampling->logprobs, arena_));
      }
    }
    if (work.state == nullptr) continue;  // a non-last context chunk
    SequenceState& state = *work.state;
    if (work.propose == 0) state.drafts.clear();
    out.next_drafts = state.drafts;
    state.history = work.next_start;
    state.last_token = work.tokens.back();
    if (work.dummy) EraseState(work.key);  // the dummy is seeded every step
  }
  num_work_ = 0;
  return result;
}

}  // namespace lockstep::engine
