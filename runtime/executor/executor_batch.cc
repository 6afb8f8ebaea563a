// Launch of a step's batch and completion of the previous one (docs/design.md §3 steps
// 7–8); the batch in flight and the deferral table are BatchInFlight's
// (batch_in_flight.h). Part of Executor; runs on the executor thread.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"
#include "runtime/executor/executor.h"
#include "spec_decode/budget.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;
using sched::RequestType;

namespace {

kv::BlockRefs MakeRef(const kv::KvManager& kv, RequestId id) {
  LOCKSTEP_CHECK(kv.Has(id, kv::PoolKind::kTarget))
      << "launching request " << id << " without a cache";
  return kv.BlockRefsOf(id);
}

}  // namespace

InFlightBatch Executor::Launch(const sched::ScheduleDecision& decision,
                               const engine::StepAgreement& agreement) {
  // A token drafter (n-gram) looks for matches in the whole sequence: hand it the
  // tokens the engine has not seen in this sequence's chunks.
  const bool token_drafter = config_.scheduler.speculative.enabled() &&
                             config_.scheduler.speculative.method == spec::Method::kNgram;
  engine::Batch batch;
  batch.step = StepId(step_);
  batch.agreement = agreement;
  batch.released = std::move(released_);
  released_.clear();
  InFlightBatch in_flight{StepId(step_), {}};
  in_flight.entries.reserve(decision.context.size() + decision.generation.size());

  for (const sched::ScheduledChunk& c : decision.context) {
    Request* r = c.request;
    engine::ContextChunk chunk;
    chunk.kv = MakeRef(*kv_, r->id());
    const auto& tokens = r->context_tokens();
    chunk.tokens.assign(tokens.begin() + c.position, tokens.begin() + c.position + c.num_tokens);
    chunk.position = c.position;
    chunk.last_chunk = c.last_chunk;
    chunk.sampling = r->sampling();
    chunk.num_draft_tokens = c.grant.num_draft_tokens;
    // Penalties and min_tokens, and a token drafter, see the whole sequence.
    const bool uses_history = r->sampling().UsesHistory();
    if (uses_history) chunk.prompt_length = static_cast<int64_t>(r->prompt().size());
    if (c.last_chunk && (uses_history || token_drafter)) {
      chunk.earlier_tokens.assign(tokens.begin(), tokens.begin() + c.position);
    }
    // An unpaired mirror that reused less than its target: the draft catches up first.
    const int64_t draft_gap = chunk.kv.draft_generation != 0 ? c.draft_gap() : 0;
    if (draft_gap > 0) {
      chunk.draft_prefix.assign(tokens.begin() + c.draft_position, tokens.begin() + c.position);
    }
    if (c.new_cache) {
      counters_.context_tokens += r->context_length();
      counters_.reused_tokens += c.position;
      r->RecordPromptReuse(std::min<int64_t>(c.position, static_cast<int64_t>(r->prompt().size())));
    }

    InFlightEntry e;
    e.id = r->id();
    e.target_generation = chunk.kv.generation;
    e.draft_generation = chunk.kv.draft_generation;
    e.is_context = true;
    e.last_chunk = c.last_chunk;
    e.position = c.position;
    e.num_tokens = c.num_tokens;
    e.num_draft_tokens = c.grant.num_draft_tokens;
    e.target_grant = c.grant.target_tokens;
    e.draft_gap = draft_gap;
    e.draft_grant = c.grant.draft_tokens + draft_gap;
    in_flight.entries.push_back(e);
    batch.context.push_back(std::move(chunk));

    r->set_context_position(c.position + c.num_tokens);
    if (c.last_chunk) {
      r->AddInFlight(1);
      const bool done_next =
          r->num_output_tokens() + r->in_flight_steps() >= r->sampling().max_tokens;
      if (r->type() == RequestType::kContextOnly || done_next) {
        r->TransitionTo(RequestState::kGenerationToComplete);
      } else {
        r->TransitionTo(RequestState::kGenerationInProgress);
      }
    }
  }

  for (size_t i = 0; i < decision.generation.size(); ++i) {
    Request* r = decision.generation[i];
    const spec::Grant& grant = decision.generation_grants[i];
    const int k = grant.num_draft_tokens;
    engine::GenerationStep step;
    step.kv = MakeRef(*kv_, r->id());
    step.num_draft_tokens = k;
    step.sampling = r->sampling();
    step.is_dummy = r->is_dummy();
    if (r->is_dummy()) {
      step.seed = engine::SequenceSeed{0, 0, std::vector<int32_t>(k, 0)};
    } else if (r->state() == RequestState::kGenTransferComplete) {
      const sched::ContextSource& source = *r->context_source();
      engine::SequenceSeed seed;
      seed.history = static_cast<int64_t>(r->prompt().size());
      seed.last_token = source.first_token;
      if (r->sampling().UsesHistory() || token_drafter) seed.tokens = r->prompt();
      // The context's drafts, as many as this step verifies.
      seed.draft_tokens.assign(
          source.first_drafts.begin(),
          source.first_drafts.begin() +
              std::min<size_t>(source.first_drafts.size(), static_cast<size_t>(k)));
      step.seed = std::move(seed);
      r->TransitionTo(RequestState::kGenerationInProgress);
    }
    InFlightEntry e;
    e.id = r->id();
    e.target_generation = step.kv.generation;
    e.draft_generation = step.kv.draft_generation;
    e.is_dummy = r->is_dummy();
    e.num_draft_tokens = k;
    e.target_grant = grant.target_tokens;
    e.draft_grant = grant.draft_tokens;
    in_flight.entries.push_back(e);
    batch.generation.push_back(std::move(step));

    if (!r->is_dummy()) {
      r->AddInFlight(1);
      if (r->num_output_tokens() + r->in_flight_steps() >= r->sampling().max_tokens) {
        r->TransitionTo(RequestState::kGenerationToComplete);
      }
    }
  }

  current_.scheduled_context = static_cast<int32_t>(decision.context.size());
  current_.scheduled_generation = static_cast<int32_t>(decision.generation.size());
  current_.tokens = decision.num_tokens;
  current_.padded = decision.context.empty() && decision.generation.size() == 1 &&
                    decision.generation[0]->is_dummy();
  if (current_.padded) ++counters_.padded_steps;
  engine_->Launch(std::move(batch));
  kv_->OnBatchLaunched();  // onboarding copies wait for this batch (kv_manager.h)
  return in_flight;
}

absl::Status Executor::Complete(const InFlightBatch& batch) {
  absl::StatusOr<engine::BatchResult> result = engine_->Collect(batch.step, config_.engine_timeout);
  if (!result.ok() && absl::IsDeadlineExceeded(result.status())) {
    // The engine is stuck: this rank cannot take part in the next forward.
    return absl::DeadlineExceededError(
        absl::StrCat("engine step ", batch.step.value(),
                     " did not finish in time: ", result.status().message()));
  }
  kv_->OnBatchCollected();  // the batch no longer reads any block
  if (result.ok() && result->sequences.size() != batch.entries.size()) {
    result = absl::InternalError(absl::StrCat("engine returned ", result->sequences.size(),
                                              " results for ", batch.entries.size(), " sequences"));
  }
  if (!result.ok()) {
    // A failed batch fails its requests; the loop goes on. The failure is this rank's
    // error even when no request is left to fail (a dummy-only batch).
    const absl::Status failure = absl::InternalError(
        absl::StrCat("engine step ", batch.step.value(), " failed: ", result.status().message()));
    LOCKSTEP_LOG_ERROR("exec", "{} ({} sequences)", failure.ToString(), batch.entries.size());
    ++counters_.engine_failures;
    ++errors_since_vote_;
    for (const InFlightEntry& e : batch.entries) {
      Request* r = e.is_dummy ? nullptr : Find(e.id);
      if (r != nullptr && !r->finished()) FailRequest(r, failure, /*transfer=*/false);
    }
    return absl::OkStatus();
  }
  const absl::Time now = clock_->Now();
  outbox_.reserve(outbox_.size() + batch.entries.size());
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const InFlightEntry& e = batch.entries[i];
    const engine::SequenceResult& sequence = result->sequences[i];
    if (sequence.status.ok()) {
      ApplyResult(e, sequence, now, &current_);
      continue;
    }
    // The engine refused this sequence alone (it wrote no KV; the rest of the batch
    // ran): only its request fails. Its caches go with it when it terminates.
    const absl::Status refused =
        absl::InternalError(absl::StrCat("engine step ", batch.step.value(), " refused request ",
                                         e.id.value(), ": ", sequence.status.message()));
    Request* r = e.is_dummy ? nullptr : Find(e.id);
    const std::optional<kv::CacheInfo> info = kv_->Info(e.id, kv::PoolKind::kTarget);
    if (r != nullptr && !r->finished() && info.has_value() &&
        info->generation == e.target_generation) {
      FailRequest(r, refused, /*transfer=*/false);
    } else {
      // The dummy, or a request ended or recomputed since the launch (a step launched
      // before its refusal was seen finds no engine state): nothing to fail.
      LOCKSTEP_LOG_WARN("exec", "{} (no live request to fail)", refused.ToString());
    }
  }
  return absl::OkStatus();
}

void Executor::ApplyKvUpdate(const InFlightEntry& e, int64_t used, kv::PoolKind pool,
                             uint64_t generation, int64_t grant) {
  kv::CacheUpdate update;
  update.id = e.id;
  update.pool = pool;
  update.generation = generation;
  const std::optional<kv::CacheInfo> info = kv_->Info(e.id, pool);
  if (info.has_value() && info->generation == generation) {
    // Positions a step used become history; the unused part of its grant is returned.
    // The draft pool keeps the K positions proposed after a last context chunk.
    const bool keep_grant = pool == kv::PoolKind::kDraft && e.is_context && e.last_chunk;
    update.history = e.is_context ? e.position + e.num_tokens : info->history + used;
    update.capacity = std::max(update.history, info->capacity - (keep_grant ? 0 : grant - used));
  } else {
    update.history = 0;  // addressed to a cache that is gone: the manager says stale
  }
  const absl::StatusOr<kv::UpdateResult> applied = kv_->ApplyUpdate(update);
  if (!applied.ok()) {
    // Cannot happen while the invariants hold: report it loudly, fail the request only.
    ++counters_.audit_violations;
    LOCKSTEP_LOG_ERROR("exec", "KV update of request {} in the {} pool failed: {}", e.id,
                       kv::PoolKindName(pool), applied.status().ToString());
    if (Request* r = Find(e.id); r != nullptr && !r->finished() && !r->is_dummy()) {
      FailRequest(
          r, absl::InternalError(absl::StrCat("KV update failed: ", applied.status().message())),
          false);
    }
    return;
  }
  if (*applied != kv::UpdateResult::kStale) return;
  if (e.is_dummy) {
    // Routine: the dummy's caches were released in the step that launched it.
    ++counters_.dummy_updates_dropped;
    ++current_.dummy_updates_dropped;
  } else {
    ++counters_.stale_updates;
    ++current_.stale_updates;
  }
}

void Executor::ApplyResult(const InFlightEntry& e, const engine::SequenceResult& result,
                           absl::Time now, StepStats* stats) {
  const int accepted = std::clamp(result.num_accepted, 0, e.num_draft_tokens);
  const int64_t used = e.is_context ? e.num_tokens : 1 + accepted;
  ApplyKvUpdate(e, used, kv::PoolKind::kTarget, e.target_generation, e.target_grant);
  if (kv_->config().draft_mode == kv::DraftMode::kUnpaired && e.draft_generation != 0) {
    ApplyKvUpdate(e, used + e.draft_gap, kv::PoolKind::kDraft, e.draft_generation, e.draft_grant);
  }
  if (e.is_dummy) return;
  Request* r = Find(e.id);
  if (r == nullptr || r->finished()) return;  // terminated since the launch
  const std::optional<kv::CacheInfo> info = kv_->Info(e.id, kv::PoolKind::kTarget);
  if (!info.has_value() || info->generation != e.target_generation) {
    return;  // paused and re-created since: recomputation reproduces these tokens
  }
  if (e.is_context) {
    if (config_.scheduler.prefix_reuse) {
      // Publish the full blocks computed so far for prefix reuse, in every pool (a
      // mirror's history now covers the chunk too: the draft prefilled it), under the
      // keys the request's context was hashed to at admission (not hashed again).
      const auto& tokens = r->context_tokens();
      const int64_t n = std::min<int64_t>(info->history, static_cast<int64_t>(tokens.size()));
      const auto chunk = absl::MakeConstSpan(tokens.data(), static_cast<size_t>(n));
      const absl::Status committed = kv_->Commit(e.id, chunk, r->prefix_keys());
      // Keys that do not cover the chunk are a bug (a debug build stops here); a served
      // build still publishes the blocks, hashing them.
      LOCKSTEP_DCHECK(committed.ok()) << committed;
      if (!committed.ok()) (void)kv_->Commit(e.id, chunk);
    }
    if (!e.last_chunk) return;
  } else {
    r->RecordAcceptance(result.num_proposed, std::min(result.num_accepted, result.num_proposed));
    ++counters_.draft_k_steps[static_cast<size_t>(
        std::clamp(e.num_draft_tokens, 0, spec::kMaxDraftTokens))];
    stats->drafts_proposed += result.num_proposed;
    stats->drafts_accepted += result.num_accepted;
    counters_.drafts_proposed += result.num_proposed;
    counters_.drafts_accepted += result.num_accepted;
    const int proposed = std::clamp(result.num_proposed, 0, spec::kMaxDraftTokens);
    const int taken = std::clamp(result.num_accepted, 0, proposed);
    for (int j = 1; j <= proposed; ++j) ++counters_.draft_position_proposed[j];
    for (int j = 1; j <= taken; ++j) ++counters_.draft_position_accepted[j];
  }
  r->AddInFlight(-1);
  r->IncrementDecodingIter();
  r->set_first_token_time(now);
  const size_t before = r->output_tokens().size();
  const sched::AppendResult appended = r->AppendTokens(result.tokens, eos_token_id());
  if (!e.is_context && config_.scheduler.prefix_reuse) PublishDecoded(*r, info->history);
  stats->generated_tokens += appended.num_appended;
  counters_.generated_tokens += appended.num_appended;
  r->set_draft_tokens(result.next_drafts);

  Response response;
  response.tokens.assign(r->output_tokens().begin() + static_cast<int64_t>(before),
                         r->output_tokens().end());
  for (int i = 0; i < appended.num_appended && i < static_cast<int>(result.logprobs.size()); ++i) {
    response.logprobs.push_back(result.logprobs[i]);
  }
  r->MarkStreamed();
  if (appended.finished) {
    r->Finish(r->finish_reason(), absl::OkStatus(), now);
    ++counters_.completed;
  } else if (r->type() == RequestType::kContextOnly) {
    StartSend(r);
    if (r->state() == RequestState::kCtxTransferInProgress) {
      sched::ContextSource handle;
      handle.instance = config_.instance;
      handle.rank = config_.rank;
      handle.address = config_.transfer_address;
      handle.remote_id = r->id();
      handle.lease_expiry = now + config_.claim_lease;
      handle.first_token = r->output_tokens().front();
      handle.first_drafts = result.next_drafts;
      response.context = std::move(handle);
    }
  }
  DescribeRequest(*r, response);
  outbox_.push_back(std::move(response));
}

void Executor::PublishDecoded(Request& r, int64_t history) {
  // KV that arrived by transfer is not published (only what this rank computed).
  if (r.context_source().has_value() && r.num_pauses() == 0) return;
  // The draft model's KV may lag the target's by one position (model_engine.h): publish
  // what every pool holds, and only the tokens the request kept.
  const int64_t n =
      std::min<int64_t>(history - 1, static_cast<int64_t>(r.prompt().size()) +
                                         r.num_output_tokens() - 1);
  bool grows = false;
  for (const kv::PoolKind pool : {kv::PoolKind::kTarget, kv::PoolKind::kDraft}) {
    const std::optional<kv::CacheInfo> info = kv_->Info(r.id(), pool);
    const int64_t tpb = kv_->tokens_per_block(pool);
    if (info.has_value() && std::min(n, info->history) / tpb * tpb > info->committed) {
      grows = true;  // a block was completed since the last commit
    }
  }
  if (!grows) return;
  commit_tokens_.assign(r.prompt().begin(), r.prompt().end());
  commit_tokens_.insert(commit_tokens_.end(), r.output_tokens().begin(), r.output_tokens().end());
  commit_tokens_.resize(static_cast<size_t>(n));
  // The keys cover the context at admission (or more, from an earlier call): both
  // sequences begin the request's tokens, so only the blocks past them are hashed.
  kv::PrefixKeys& keys = *r.mutable_prefix_keys();
  if (keys.num_tokens() < n) kv_->HashPrefix(commit_tokens_, &keys);
  const absl::Status committed = kv_->Commit(r.id(), commit_tokens_, keys);
  LOCKSTEP_DCHECK(committed.ok()) << committed;  // as for a context chunk
  if (!committed.ok()) (void)kv_->Commit(r.id(), commit_tokens_);
}

}  // namespace lockstep::exec
