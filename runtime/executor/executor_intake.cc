// Intake as the executor drives it (docs/design.md §3 step 1): the leader's inbox broadcast
// to every rank, validation, deterministic rank assignment, admission and cancels.
// Part of Executor; runs on the executor thread.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/executor/executor.h"
#include "scheduler/rank_assignment.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

using sched::InstanceRole;
using sched::Request;
using sched::RequestState;
using sched::RequestType;

absl::StatusOr<Executor::InstanceView> Executor::Intake() {
  IntakeBatch batch;
  if (is_leader()) {
    IntakeBatch raw;
    inbox_.TakeAll(&raw);
    batch.cancels = std::move(raw.cancels);
    batch.drain = raw.drain;
    // Only the leader's clock decides the drain deadline; the flag makes every rank act
    // on it in the same step.
    batch.drain_expired = draining_ && clock_->Now() >= drain_deadline_;
    for (NewRequestSpec& spec : raw.requests) {
      absl::Status valid = ValidateNew(spec);
      if (valid.ok() && (draining_ || batch.drain)) {
        valid = absl::UnavailableError(
            absl::StrCat("instance ", config_.instance, " is draining: not accepting requests"));
      }
      if (!valid.ok()) {
        EmitFinal(spec.id, sched::FinishReason::kError, valid);
        ++counters_.rejected;
        continue;
      }
      batch.requests.push_back(std::move(spec));
    }
  }
  std::string bytes = is_leader() ? batch.Encode() : std::string();
  RETURN_IF_ERROR(comm_->Broadcast(&bytes, 0, Call("intake")));
  if (!is_leader()) {
    ASSIGN_OR_RETURN(batch, IntakeBatch::Decode(bytes));
  }
  if (batch.drain && !draining_) {
    draining_ = true;
    if (is_leader()) drain_deadline_ = clock_->Now() + config_.drain_timeout;
    LOCKSTEP_LOG_INFO("exec", "draining: finishing {} live requests", LiveIds().size());
  }
  if (batch.drain_expired) drain_expired_ = true;
  for (NewRequestSpec& spec : batch.requests) queue_.push_back(std::move(spec));
  for (RequestId id : batch.cancels) HandleCancel(id);

  // Loads of every rank, then the same assignment everywhere.
  const std::vector<Request*> active = ActiveView();
  int64_t tokens = 0;  // in flight: sequence lengths
  counters_.draft_k_requests.fill(0);
  for (const Request* r : active) {
    if (r->is_dummy()) continue;
    tokens += static_cast<int64_t>(r->prompt().size()) + r->num_output_tokens();
    if (r->state() == sched::RequestState::kGenerationInProgress ||
        r->state() == sched::RequestState::kGenTransferComplete) {
      ++counters_.draft_k_requests[static_cast<size_t>(scheduler_.DraftTokensFor(*r))];
    }
  }
  const InstanceLoads::Row local =
      InstanceLoads::LocalRow(sched::Scheduler::CountActive(active), tokens,
                              sched::Scheduler::CountSchedulable(active), *kv_, counters_);
  std::vector<int64_t> all(InstanceLoads::kFields * static_cast<size_t>(config_.world_size));
  RETURN_IF_ERROR(comm_->AllGather(absl::MakeConstSpan(local), absl::MakeSpan(all), Call("loads")));
  InstanceView view;
  const std::vector<sched::RankLoad> loads =
      loads_.Absorb(all, config_.world_size, counters_, &view.schedulable);
  current_.token_imbalance = sched::TokenImbalance(loads);
  if (queue_.empty()) return view;

  // Only the oldest requests that can fit this step are candidates, so a request never
  // waits behind younger ones (assignment balances longest prompts first, which alone
  // would let a stream of long prompts starve a short one).
  int64_t room = 0;
  for (const sched::RankLoad& l : loads) {
    room += std::max<int64_t>(0, config_.scheduler.max_num_active_requests - l.active_requests);
  }
  const size_t window = std::min<size_t>(queue_.size(), static_cast<size_t>(room));
  std::vector<sched::NewRequest> candidates;
  candidates.reserve(window);
  for (size_t i = 0; i < window; ++i) {
    const NewRequestSpec& s = queue_[i];
    candidates.push_back(
        {s.id, static_cast<int64_t>(s.prompt.size()), s.pinned_rank, s.preferred_rank});
  }
  const sched::RankAssignment assignment =
      sched::AssignRanks(loads, candidates, config_.scheduler.max_num_active_requests);
  std::vector<NewRequestSpec> mine;
  std::deque<NewRequestSpec> still_queued;
  for (size_t i = 0; i < queue_.size(); ++i) {
    const int32_t rank = i < window ? assignment.rank_of[i] : -1;
    if (rank < 0) {
      still_queued.push_back(std::move(queue_[i]));
      continue;
    }
    // A generation-only request waits for its KV: not schedulable yet.
    if (queue_[i].type != RequestType::kGenerationOnly) ++view.schedulable;
    if (rank == config_.rank) mine.push_back(std::move(queue_[i]));
  }
  queue_ = std::move(still_queued);
  AdmitAssigned(std::move(mine));
  return view;
}

absl::Status Executor::ValidateNew(const NewRequestSpec& spec) const {
  const auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("request ", spec.id.value(), ": ", what));
  };
  if (spec.prompt.empty()) return bad("prompt is empty");
  for (int32_t t : spec.prompt) {
    if (t < 0 || t >= engine_info_.vocab_size) {
      return bad(absl::StrCat("prompt token ", t, " is outside the vocabulary [0, ",
                              engine_info_.vocab_size, ")"));
    }
  }
  if (absl::Status s = spec.sampling.Validate(engine_info_.vocab_size); !s.ok()) {
    return bad(s.message());
  }
  const bool role_ok =
      (config_.role == InstanceRole::kAggregated && spec.type == RequestType::kAggregated) ||
      (config_.role == InstanceRole::kContext && spec.type == RequestType::kContextOnly) ||
      (config_.role == InstanceRole::kGeneration && spec.type == RequestType::kGenerationOnly);
  if (!role_ok) {
    return bad(absl::StrCat("a ", sched::RequestTypeName(spec.type), " request cannot run on a ",
                            InstanceRoleName(config_.role), " instance"));
  }
  if (spec.type == RequestType::kGenerationOnly && !spec.context_source.has_value()) {
    return bad("a generation_only request needs its context source");
  }
  const int64_t total = static_cast<int64_t>(spec.prompt.size()) + spec.sampling.max_tokens;
  if (engine_info_.max_position > 0 && total > engine_info_.max_position) {
    return bad(absl::StrCat("prompt + max_tokens = ", total, " exceeds the model's maximum length ",
                            engine_info_.max_position));
  }
  // The longest this request can get, with two steps of speculative slack, must fit the
  // pool on its own; otherwise it could never finish.
  const int64_t needed = kv_->layout(kv::PoolKind::kTarget)
                             .BlocksFor(total + 2 * config_.scheduler.generation_step_tokens());
  const int64_t usable =
      kv_->num_blocks(kv::PoolKind::kTarget) -
      kv_->layout(kv::PoolKind::kTarget).BlocksFor(config_.kv.dummy_reserved_tokens);
  if (needed > usable) {
    return bad(absl::StrCat("needs ", needed, " KV blocks, the pool has ", usable));
  }
  return absl::OkStatus();
}

void Executor::AdmitAssigned(std::vector<NewRequestSpec> specs) {
  const absl::Time now = clock_->Now();
  for (NewRequestSpec& spec : specs) {
    counters_.prompt_tokens += static_cast<int64_t>(spec.prompt.size());
    auto request = std::make_unique<Request>(spec.id, spec.type, std::move(spec.prompt),
                                             std::move(spec.sampling), spec.arrival,
                                             config_.scheduler.speculative);
    if (spec.context_source.has_value()) {
      // The context leg already streamed the first token: count it, do not resend it.
      const int32_t first = spec.context_source->first_token;
      request->set_context_source(std::move(*spec.context_source));
      request->set_transfer_deadline(now + config_.transfer_deadline);
      const sched::AppendResult appended = request->AppendTokens({first}, eos_token_id());
      request->MarkStreamed();
      request->set_first_token_time(now);
      if (appended.finished) {
        request->Finish(request->finish_reason(), absl::OkStatus(), now);
        EmitResponse(request.get());
        ++counters_.completed;
      }
    }
    by_id_[request->id()] = request.get();
    active_.push_back(std::move(request));
  }
}

void Executor::HandleCancel(RequestId id) {
  const absl::Status cancelled =
      absl::CancelledError(absl::StrCat("request ", id.value(), " was cancelled by the client"));
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->id != id) continue;
    queue_.erase(it);
    if (is_leader()) {
      EmitFinal(id, sched::FinishReason::kCancelled, cancelled);
      ++counters_.cancelled;
    }
    return;
  }
  if (Request* r = Find(id); r != nullptr && !r->finished()) {
    if (r->state() == RequestState::kGenTransferInProgress) {
      // The receive may still be writing the blocks: finish once the transceiver says
      // it stopped.
      cancelling_.emplace(id, PendingCancel{cancelled});
      transceiver_->Cancel(id);
      return;
    }
    r->Finish(sched::FinishReason::kCancelled, cancelled, clock_->Now());
    EmitResponse(r);
    ++counters_.cancelled;
    return;
  }
  if (claims_.contains(id) && transceiver_ != nullptr) transceiver_->Cancel(id);
}

}  // namespace lockstep::exec
