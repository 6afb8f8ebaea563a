#include "runtime/executor/executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/executor/step_vote.h"
#include "scheduler/rank_assignment.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;
using sched::RequestType;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const ExecutorConfig& config,
                                                           Deps deps) {
  RETURN_IF_ERROR(config.Validate());
  if (deps.comm == nullptr || deps.engine == nullptr || deps.kv == nullptr ||
      deps.clock == nullptr) {
    return absl::InvalidArgumentError(
        "executor needs a communicator, an engine, a KV "
        "manager and a clock");
  }
  if (deps.comm->world_size() != config.world_size || deps.comm->rank() != config.rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator is rank ", deps.comm->rank(), " of ", deps.comm->world_size(),
                     ", config says rank ", config.rank, " of ", config.world_size));
  }
  return absl::WrapUnique(new Executor(config, std::move(deps)));
}

Executor::Executor(const ExecutorConfig& config, Deps deps)
    : config_(config),
      comm_(deps.comm),
      engine_(deps.engine),
      kv_(std::move(deps.kv)),
      transceiver_(deps.transceiver),
      clock_(deps.clock),
      sink_(deps.sink),
      engine_info_(deps.engine->info()),
      scheduler_(config.scheduler, kv_.get()),
      stats_ring_(config.stats_ring_size) {}

Executor::~Executor() = default;

Request* Executor::Find(RequestId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<Request*> Executor::ActiveView() const {
  std::vector<Request*> out;
  out.reserve(active_.size());
  for (const auto& r : active_) out.push_back(r.get());
  return out;
}

std::vector<RequestId> Executor::LiveIds() const {
  std::vector<RequestId> ids;
  for (const auto& r : active_) {
    if (!r->is_dummy()) ids.push_back(r->id());
  }
  return ids;
}

std::vector<RequestId> Executor::ClaimedIds() const {
  std::vector<RequestId> ids;
  for (const auto& [id, r] : claims_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// ---- The step. ----

absl::Status Executor::Step() {
  const absl::Time start = clock_->Now();
  current_ = StepStats();
  current_.step = step_;

  // Transfers are polled (rank-locally) before the load all-gather, so that a receive
  // that just finished counts as schedulable in every rank's pad decision.
  PollTransfers();
  ASSIGN_OR_RETURN(const InstanceView view, Intake());
  EnforceDrainDeadline();
  PadBeforeSchedule(view);

  sched::Rollback rollback;
  const std::vector<Request*> active = ActiveView();
  sched::ScheduleDecision decision = scheduler_.Schedule(active, in_flight_.has_value(), &rollback);
  counters_.paused += static_cast<int64_t>(decision.paused.size());
  if (decision.no_progress) ++counters_.no_progress;
  QueueReceives(decision);
  PadAfterSchedule(view, &decision, &rollback);

  // The vote: every rank, every step.
  StepVote mine;
  mine.empty_batch = decision.empty() ? 1 : 0;
  mine.nonempty_batch = decision.empty() ? 0 : 1;
  mine.errors = errors_since_vote_;
  mine.busy =
      (!LiveIds().empty() || !claims_.empty() || in_flight_.has_value() || !queue_.empty()) ? 1 : 0;
  errors_since_vote_ = 0;
  auto encoded = mine.Encode();
  RETURN_IF_ERROR(comm_->AllReduce(absl::MakeSpan(encoded), comm::ReduceOp::kMax, Call("vote")));
  const StepVote vote = StepVote::Decode(encoded);
  const bool can_queue = vote.can_queue();
  const bool local_nonempty = !decision.empty();

  std::optional<InFlightBatch> launched;
  if (can_queue) {
    launched = Launch(decision);
    rollback.Commit();
  } else {
    // No rank forwards: undo this step's growth, the pending dummy included, in every
    // pool (the dummy's caches were created this step, so Release frees them all).
    rollback.Undo(*kv_);
    if (vote.vetoed()) {
      ++counters_.vetoed_steps;
      current_.vetoed = true;
    }
  }
  // A dummy never outlives its step: a committed one was just launched (its blocks are
  // written only by that batch), a pending one was rolled back.
  RemoveDummy();

  // The deferral table: process the previous batch unless the fleet vetoed while this
  // rank had a batch (its host update then waits for the next forward).
  const bool process_previous = can_queue || !local_nonempty;
  if (in_flight_.has_value()) {
    if (process_previous) {
      RETURN_IF_ERROR(Complete(*in_flight_));
      in_flight_.reset();
    } else {
      ++counters_.deferred_updates;
      current_.deferred = true;
    }
  }
  if (launched.has_value()) in_flight_ = std::move(launched);
  StartReadyReceives();

  RETURN_IF_ERROR(Respond());

  idle_ = vote.nonempty_batch == 0;
  busy_ = vote.busy != 0;
  if (draining_ && vote.busy == 0) drained_ = true;
  if (config_.audit_every_step) {
    const std::vector<std::string> violations = Audit();
    counters_.audit_violations += static_cast<int64_t>(violations.size());
    for (const std::string& v : violations) {
      LOCKSTEP_LOG_ERROR("exec", "audit at step {}: {}", step_, v);
    }
  }

  const kv::ManagerStats kv_stats = kv_->Stats();
  current_.free_blocks = kv_stats.target.free_blocks;
  current_.free_draft_blocks = kv_stats.draft ? kv_stats.draft->free_blocks : 0;
  current_.step_time = clock_->Now() - start;
  stats_ring_.Push(current_);
  ++counters_.steps;
  ++step_;
  PublishSnapshot();
  return absl::OkStatus();
}

// ---- Intake. ----

absl::StatusOr<Executor::InstanceView> Executor::Intake() {
  IntakeBatch batch;
  if (is_leader()) {
    IntakeBatch raw;
    inbox_.TakeAll(&raw);
    batch.cancels = std::move(raw.cancels);
    batch.drain = raw.drain;
    for (NewRequestSpec& spec : raw.requests) {
      absl::Status valid = ValidateNew(spec);
      if (valid.ok() && (draining_ || batch.drain)) {
        valid = absl::UnavailableError(
            absl::StrCat("instance ", config_.instance, " is draining: not accepting requests"));
      }
      if (!valid.ok()) {
        Response r;
        r.id = spec.id;
        r.step = step_;
        r.finished = true;
        r.finish_reason = sched::FinishReason::kError;
        r.status = valid;
        outbox_.push_back(std::move(r));
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
    drain_deadline_ = clock_->Now() + config_.drain_timeout;
    LOCKSTEP_LOG_INFO("exec", "draining: finishing {} live requests", LiveIds().size());
  }
  for (NewRequestSpec& spec : batch.requests) queue_.push_back(std::move(spec));
  for (RequestId id : batch.cancels) HandleCancel(id);

  // Loads of every rank, then the same assignment everywhere.
  const std::vector<Request*> active = ActiveView();
  int64_t tokens = 0;
  for (const Request* r : active) {
    if (!r->is_dummy()) tokens += static_cast<int64_t>(r->prompt().size());
  }
  const kv::ManagerStats kv_stats = kv_->Stats();
  constexpr int kLoadFields = 7;
  constexpr int kFields = kLoadFields + kNumPerRankCounters;
  int64_t local[kFields] = {sched::Scheduler::CountActive(active),
                            tokens,
                            sched::Scheduler::CountSchedulable(active),
                            kv_stats.target.free_blocks,
                            kv_stats.draft ? kv_stats.draft->free_blocks : 0,
                            kv_stats.target.used_blocks,
                            kv_stats.draft ? kv_stats.draft->used_blocks : 0};
  for (int i = 0; i < kNumPerRankCounters; ++i) {
    local[kLoadFields + i] = counters_.*kPerRankCounters[i];
  }
  std::vector<int64_t> all(kFields * static_cast<size_t>(config_.world_size));
  RETURN_IF_ERROR(comm_->AllGather(absl::MakeConstSpan(local), absl::MakeSpan(all), Call("loads")));
  std::vector<sched::RankLoad> loads(config_.world_size);
  InstanceView view;
  free_target_blocks_.resize(config_.world_size);
  free_draft_blocks_.resize(config_.world_size);
  used_target_blocks_.resize(config_.world_size);
  used_draft_blocks_.resize(config_.world_size);
  instance_counters_ = counters_;
  for (int i = 0; i < kNumPerRankCounters; ++i) instance_counters_.*kPerRankCounters[i] = 0;
  for (int r = 0; r < config_.world_size; ++r) {
    const int64_t* f = &all[kFields * r];
    loads[r] = {f[0], f[1]};
    view.schedulable += f[2];
    free_target_blocks_[r] = f[3];
    free_draft_blocks_[r] = f[4];
    used_target_blocks_[r] = f[5];
    used_draft_blocks_[r] = f[6];
    for (int i = 0; i < kNumPerRankCounters; ++i) {
      instance_counters_.*kPerRankCounters[i] += f[kLoadFields + i];
    }
  }
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
    candidates.push_back({s.id, static_cast<int64_t>(s.prompt.size()), s.pinned_rank});
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
      (config_.role == Role::kAggregated && spec.type == RequestType::kAggregated) ||
      (config_.role == Role::kContext && spec.type == RequestType::kContextOnly) ||
      (config_.role == Role::kGeneration && spec.type == RequestType::kGenerationOnly);
  if (!role_ok) {
    return bad(absl::StrCat("a ", sched::RequestTypeName(spec.type), " request cannot run on a ",
                            RoleName(config_.role), " instance"));
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
                                             std::move(spec.sampling), spec.arrival);
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
      Response r;
      r.id = id;
      r.step = step_;
      r.finished = true;
      r.finish_reason = sched::FinishReason::kCancelled;
      r.status = cancelled;
      outbox_.push_back(std::move(r));
      ++counters_.cancelled;
    }
    return;
  }
  if (Request* r = Find(id); r != nullptr && !r->finished()) {
    if (r->state() == RequestState::kGenTransferInProgress) {
      // The receive may still be writing the blocks: finish once the transceiver says
      // it stopped.
      cancelling_.emplace(id, cancelled);
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

// ---- Padding. ----

void Executor::PadBeforeSchedule(const InstanceView& view) {
  const std::vector<Request*> active = ActiveView();
  if (view.schedulable == 0 || sched::Scheduler::CountSchedulable(active) > 0) return;
  if (config_.scheduler.dummy_policy == sched::DummyPolicy::kCompat && scheduler_.AtCap(active)) {
    ++counters_.dummies_refused;  // the anchor's refusal: a full rank cannot pad
    return;
  }
  auto dummy = Request::MakeDummy(kv_->dummy_id(), clock_->Now());
  dummy_ = dummy.get();
  by_id_[dummy->id()] = dummy.get();
  active_.push_back(std::move(dummy));
  ++counters_.dummies_created;
}

void Executor::PadAfterSchedule(const InstanceView& view, sched::ScheduleDecision* decision,
                                sched::Rollback* rollback) {
  if (!decision->empty() || view.schedulable == 0) return;
  if (dummy_ != nullptr || (config_.scheduler.dummy_policy == sched::DummyPolicy::kCompat &&
                            scheduler_.AtCap(ActiveView()))) {
    ++counters_.dummies_refused;  // no KV for the dummy, or a full rank under compat
    return;
  }
  auto dummy = Request::MakeDummy(kv_->dummy_id(), clock_->Now());
  if (!scheduler_.ScheduleDummy(dummy.get(), rollback)) {
    ++counters_.dummies_refused;
    return;
  }
  dummy_ = dummy.get();
  by_id_[dummy->id()] = dummy.get();
  decision->generation.push_back(dummy.get());
  active_.push_back(std::move(dummy));
  ++counters_.dummies_created;
}

void Executor::RemoveDummy() {
  if (dummy_ == nullptr) return;
  Release(dummy_->id());
  by_id_.erase(dummy_->id());
  LOCKSTEP_CHECK(!active_.empty() && active_.back().get() == dummy_)
      << "the pad dummy must be the last active request";
  active_.pop_back();
  dummy_ = nullptr;
}

// ---- Responses and termination. ----

void Executor::EmitResponse(Request* request) {
  Response r;
  r.id = request->id();
  r.rank = config_.rank;
  r.step = step_;
  const auto& out = request->output_tokens();
  r.tokens.assign(out.begin() + request->num_streamed_tokens(), out.end());
  request->MarkStreamed();
  r.finished = request->finished();
  r.finish_reason = request->finish_reason();
  r.status = request->status();
  r.num_prompt_tokens = static_cast<int64_t>(request->prompt().size());
  r.drafts_proposed = request->drafts_proposed();
  r.drafts_accepted = request->drafts_accepted();
  outbox_.push_back(std::move(r));
}

void Executor::FailRequest(Request* request, absl::Status status, bool transfer) {
  LOCKSTEP_LOG_WARN("exec", "request {} failed: {}", request->id(), status.ToString());
  request->Finish(sched::FinishReason::kError, std::move(status), clock_->Now(), transfer);
  EmitResponse(request);
  ++errors_since_vote_;
  ++counters_.failed;
  if (transfer) ++counters_.transfer_failures;
}

absl::Status Executor::Respond() {
  const std::string bytes = EncodeResponses(outbox_);
  outbox_.clear();
  ASSIGN_OR_RETURN(std::vector<std::string> gathered, comm_->Gather(bytes, 0, Call("responses")));
  if (is_leader()) {
    std::vector<Response> all;
    for (const std::string& part : gathered) {
      ASSIGN_OR_RETURN(std::vector<Response> rank_responses, DecodeResponses(part));
      for (Response& r : rank_responses) all.push_back(std::move(r));
    }
    if (sink_ != nullptr && !all.empty()) sink_->OnResponses(std::move(all));
  }
  TerminateFinished();
  return absl::OkStatus();
}

void Executor::TerminateFinished() {
  // Terminated only after the gather delivered their last response (invariant §7.8).
  std::vector<std::unique_ptr<Request>> kept;
  kept.reserve(active_.size());
  for (auto& r : active_) {
    if (r->state() == RequestState::kCtxTransferInProgress) {
      // Its KV is being sent: the transfer claim holds it until the send ends.
      by_id_.erase(r->id());
      claims_.emplace(r->id(), std::move(r));
      continue;
    }
    if (!r->finished()) {
      kept.push_back(std::move(r));
      continue;
    }
    Release(r->id());
    by_id_.erase(r->id());
  }
  active_ = std::move(kept);
}

void Executor::Release(RequestId id) {
  engine::KvRef ref;
  ref.id = id;
  if (auto info = kv_->Info(id, kv::PoolKind::kTarget)) ref.generation = info->generation;
  if (auto info = kv_->Info(id, kv::PoolKind::kDraft)) ref.draft_generation = info->generation;
  if (kv_->Release(id) > 0) released_.push_back(std::move(ref));
}

void Executor::EnforceDrainDeadline() {
  if (!draining_ || clock_->Now() < drain_deadline_) return;
  const absl::Status late = absl::UnavailableError(absl::StrCat(
      "instance ", config_.instance, " drain deadline exceeded; request not finished"));
  for (const auto& r : active_) {
    if (r->finished() || r->is_dummy()) continue;
    if (r->state() == RequestState::kGenTransferInProgress) {
      if (cancelling_.emplace(r->id(), late).second) transceiver_->Cancel(r->id());
      continue;
    }
    FailRequest(r.get(), late, /*transfer=*/false);
  }
  for (const auto& [id, r] : claims_) transceiver_->Cancel(id);
  // Accepted but never assigned: answered by the leader (the queue is the same on every
  // rank, so every rank drops it).
  for (const NewRequestSpec& spec : queue_) {
    if (!is_leader()) break;
    Response r;
    r.id = spec.id;
    r.step = step_;
    r.finished = true;
    r.finish_reason = sched::FinishReason::kError;
    r.status = late;
    outbox_.push_back(std::move(r));
    ++counters_.failed;
  }
  queue_.clear();
}

// ---- Snapshot and audit. ----

void Executor::PublishSnapshot() {
  ExecutorSnapshot s;
  s.step = step_;
  s.last_step_time = clock_->Now();
  s.draining = draining_;
  s.drained = drained_;
  s.active_requests = static_cast<int64_t>(LiveIds().size());
  s.queued_requests = static_cast<int64_t>(queue_.size());
  s.claimed_requests = static_cast<int64_t>(claims_.size());
  s.kv = kv_->Stats();
  s.free_target_blocks = free_target_blocks_;
  s.free_draft_blocks = free_draft_blocks_;
  s.used_target_blocks = used_target_blocks_;
  s.used_draft_blocks = used_draft_blocks_;
  s.instance_counters = instance_counters_;
  s.counters = counters_;
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ = std::move(s);
}

ExecutorSnapshot Executor::Snapshot() const {
  absl::MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

std::vector<std::string> Executor::DescribeRequests() const {
  std::vector<std::string> out;
  for (const auto& r : active_) {
    std::string line = r->DebugString();
    if (const auto info = kv_->Info(r->id(), kv::PoolKind::kTarget)) {
      absl::StrAppend(&line, " kv[gen ", info->generation, " hist ", info->history, " cap ",
                      info->capacity, "]");
    }
    out.push_back(std::move(line));
  }
  for (const auto& [id, r] : claims_) out.push_back(absl::StrCat("claimed ", r->DebugString()));
  absl::StrAppend(&out.emplace_back(), "queued ", queue_.size(), ", free blocks ",
                  kv_->Stats().target.free_blocks);
  return out;
}

std::vector<std::string> Executor::Audit() const {
  std::vector<std::string> out = kv_->Audit(LiveIds(), ClaimedIds(), dummy_ != nullptr);
  if (dummy_ != nullptr) out.push_back("a pad dummy survived the end of its step");
  for (const auto& r : active_) {
    const bool has_cache = kv_->Has(r->id(), kv::PoolKind::kTarget);
    if (r->finished()) {
      out.push_back(absl::StrCat(r->DebugString(), " is finished but still active"));
    }
    if (r->state() == RequestState::kGenTransferInProgress && !has_cache) {
      out.push_back(absl::StrCat(r->DebugString(), " receives KV into no cache"));
    }
    if ((r->state() == RequestState::kGenerationInProgress ||
         r->state() == RequestState::kGenerationToComplete) &&
        !has_cache) {
      out.push_back(absl::StrCat(r->DebugString(), " decodes without a cache"));
    }
  }
  for (const auto& [id, r] : claims_) {
    if (!kv_->Has(id, kv::PoolKind::kTarget)) {
      out.push_back(absl::StrCat("claimed request ", id.value(), " has no cache to send"));
    }
  }
  return out;
}

}  // namespace lockstep::exec
