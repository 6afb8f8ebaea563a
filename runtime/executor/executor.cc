#include "runtime/executor/executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "runtime/executor/step_vote.h"
#include "spec_decode/budget.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;

namespace {

// The instance's scheduling config, with the engine's position limit (no step's K
// reaches past the model's last position).
sched::SchedulerConfig SchedulerConfigFor(const ExecutorConfig& config,
                                          const engine::EngineInfo& info) {
  sched::SchedulerConfig out = config.scheduler;
  if (info.max_position > 0 && (out.max_position <= 0 || info.max_position < out.max_position)) {
    out.max_position = info.max_position;
  }
  return out;
}

}  // namespace

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
      kv_event_sink_(deps.kv_event_sink),
      engine_info_(deps.engine->info()),
      scheduler_(SchedulerConfigFor(config, engine_info_), kv_.get()),
      stats_ring_(config.stats_ring_size) {
  if (config_.kv_events) {
    kv_event_log_ = std::make_unique<kv::KvEventLog>();
    kv_->SetEventObserver(kv_event_log_.get());
  }
}

Executor::~Executor() {
  if (kv_event_log_ != nullptr) kv_->SetEventObserver(nullptr);
}

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
  audit_.BeginStep();

  // Transfers are polled (rank-locally) before the load all-gather, so that a receive
  // that just finished counts as schedulable in every rank's pad decision.
  PollTransfers();
  ASSIGN_OR_RETURN(const InstanceView view, Intake());
  EnforceDrainDeadline();
  PadBeforeSchedule(view);

  // With the audit on: the pools as they were before the schedule (§7.4).
  std::optional<kv::KvSnapshot> before;
  if (config_.audit_every_step) before = kv::TakeSnapshot(*kv_);
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
  current_.errors = static_cast<int32_t>(errors_since_vote_);
  counters_.errors += errors_since_vote_;
  mine.busy =
      (!LiveIds().empty() || !claims_.empty() || in_flight_.has_value() || !queue_.empty()) ? 1 : 0;
  // The forward's rows, the pad dummy's included (the token budget leaves it out).
  for (const sched::ScheduledChunk& c : decision.context) mine.rows += c.num_tokens;
  for (const spec::Grant& g : decision.generation_grants) mine.rows += 1 + g.num_draft_tokens;
  mine.context = decision.context.empty() ? 0 : 1;
  errors_since_vote_ = 0;
  auto encoded = mine.Encode();
  RETURN_IF_ERROR(comm_->AllReduce(absl::MakeSpan(encoded), comm::ReduceOp::kMax, Call("vote")));
  const StepVote vote = StepVote::Decode(encoded);
  current_.max_rank_errors = static_cast<int32_t>(vote.errors);
  if (vote.errors > 0) ++counters_.error_steps;
  const bool can_queue = vote.can_queue();
  const bool local_nonempty = !decision.empty();

  std::optional<InFlightBatch> launched;
  if (can_queue) {
    launched = Launch(decision, engine::StepAgreement{vote.rows, vote.context != 0, true});
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
  if (before.has_value() && !can_queue) audit_.AuditUnforwardedStep(step_, *before, *kv_, decision);

  // The deferral table: process the previous batch unless the fleet vetoed while this
  // rank had a batch (its host update then waits for the next forward).
  const bool process_previous = BatchInFlight::ProcessPrevious(can_queue, local_nonempty);
  if (in_flight_.has_value()) {
    if (process_previous) {
      RETURN_IF_ERROR(Complete(in_flight_.batch()));
      in_flight_.Clear();
    } else {
      ++counters_.deferred_updates;
      current_.deferred = true;
    }
  }
  if (launched.has_value()) in_flight_.Hold(std::move(*launched));
  StartReadyReceives();

  RETURN_IF_ERROR(Respond());
  BindCaches();

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

// ---- Padding. ----

void Executor::PadBeforeSchedule(const InstanceView& view) {
  const std::vector<Request*> active = ActiveView();
  if (view.schedulable == 0 || sched::Scheduler::CountSchedulable(active) > 0) return;
  if (config_.scheduler.dummy_policy == sched::DummyPolicy::kCompat && scheduler_.AtCap(active)) {
    ++counters_.dummies_refused;  // the anchor's refusal: a full rank cannot pad
    current_.pad_refusal = PadRefusal::kAtCap;
    return;
  }
  auto dummy = Request::MakeDummy(kv_->dummy_id(), clock_->Now());
  dummy_ = dummy.get();
  by_id_[dummy->id()] = dummy.get();
  active_.push_back(std::move(dummy));
  ++counters_.dummies_created;
  current_.pad_source = PadSource::kBeforeSchedule;
}

void Executor::PadAfterSchedule(const InstanceView& view, sched::ScheduleDecision* decision,
                                sched::Rollback* rollback) {
  if (!decision->empty() || view.schedulable == 0) return;
  if (dummy_ != nullptr) {
    // The pre-schedule dummy got no KV: one dummy per rank, never a second.
    ++counters_.dummies_refused;
    current_.pad_refusal = PadRefusal::kDummyExists;
    return;
  }
  if (config_.scheduler.dummy_policy == sched::DummyPolicy::kCompat &&
      scheduler_.AtCap(ActiveView())) {
    ++counters_.dummies_refused;
    current_.pad_refusal = PadRefusal::kAtCap;
    return;
  }
  auto dummy = Request::MakeDummy(kv_->dummy_id(), clock_->Now());
  if (!scheduler_.ScheduleDummy(dummy.get(), decision, rollback)) {
    ++counters_.dummies_refused;
    current_.pad_refusal = PadRefusal::kNoKv;
    return;
  }
  current_.pad_source = PadSource::kAfterSchedule;
  dummy_ = dummy.get();
  by_id_[dummy->id()] = dummy.get();
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

void Executor::DescribeRequest(const Request& request, Response& out) const {
  out.id = request.id();
  out.rank = config_.rank;
  out.step = step_;
  out.finished = request.finished();
  out.finish_reason = request.finish_reason();
  out.status = request.status();
  out.num_prompt_tokens = static_cast<int64_t>(request.prompt().size());
  out.cached_prompt_tokens = request.cached_prompt_tokens();
  out.drafts_proposed = request.drafts_proposed();
  out.drafts_accepted = request.drafts_accepted();
}

void Executor::EmitResponse(Request* request) {
  Response r;
  const auto& out = request->output_tokens();
  r.tokens.assign(out.begin() + request->num_streamed_tokens(), out.end());
  request->MarkStreamed();
  DescribeRequest(*request, r);
  outbox_.push_back(std::move(r));
}

void Executor::EmitFinal(RequestId id, sched::FinishReason reason, absl::Status status) {
  Response r;
  r.id = id;
  r.step = step_;
  r.finished = true;
  r.finish_reason = reason;
  r.status = std::move(status);
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

void Executor::FailPull(Request* request, absl::Status status) {
  FailRequest(request, std::move(status), /*transfer=*/true);
  outbox_.back().kv_pull_failed = true;  // the response FailRequest just emitted
}

absl::Status Executor::Respond() {
  // KV events ride on this gather: no collective of their own (docs/design.md §3).
  const std::string bytes = EncodeGatherPart(
      outbox_, kv_event_log_ != nullptr ? kv_event_log_->Take() : kv::KvEventDelta());
  outbox_.clear();
  ASSIGN_OR_RETURN(std::vector<std::string> gathered, comm_->Gather(bytes, 0, Call("responses")));
  if (is_leader()) {
    std::vector<Response> all;
    std::vector<kv::KvEventDelta> events(gathered.size());
    bool any_events = false;
    for (size_t rank = 0; rank < gathered.size(); ++rank) {
      std::vector<Response> rank_responses;
      RETURN_IF_ERROR(DecodeGatherPart(gathered[rank], &rank_responses, &events[rank]));
      any_events = any_events || !events[rank].empty();
      for (Response& r : rank_responses) all.push_back(std::move(r));
    }
    if (sink_ != nullptr && !all.empty()) sink_->OnResponses(std::move(all));
    if (kv_event_sink_ != nullptr && any_events) kv_event_sink_->OnKvEvents(events);
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
  kv::BlockRefs ref;
  ref.id = id;
  if (auto info = kv_->Info(id, kv::PoolKind::kTarget)) ref.generation = info->generation;
  if (auto info = kv_->Info(id, kv::PoolKind::kDraft)) ref.draft_generation = info->generation;
  if (kv_->Release(id) > 0) released_.push_back(std::move(ref));
  audit_.Forget(id);
}

void Executor::EnforceDrainDeadline() {
  if (!drain_expired_) return;  // decided by the leader's clock, broadcast at intake
  const absl::Status late = absl::UnavailableError(absl::StrCat(
      "instance ", config_.instance, " drain deadline exceeded; request not finished"));
  for (const auto& r : active_) {
    if (r->finished() || r->is_dummy()) continue;
    if (r->state() == RequestState::kGenTransferInProgress) {
      if (cancelling_.emplace(r->id(), PendingCancel{late}).second) transceiver_->Cancel(r->id());
      continue;
    }
    FailRequest(r.get(), late, /*transfer=*/false);
  }
  for (const auto& [id, r] : claims_) transceiver_->Cancel(id);
  // Accepted but never assigned: answered by the leader (the queue is the same on every
  // rank, so every rank drops it).
  for (const NewRequestSpec& spec : queue_) {
    if (!is_leader()) break;
    EmitFinal(spec.id, sched::FinishReason::kError, late);
    ++counters_.failed;
  }
  queue_.clear();
}

// ---- Snapshot (the audit is in executor_audit.cc). ----

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
  s.free_target_blocks = loads_.free_target_blocks();
  s.free_draft_blocks = loads_.free_draft_blocks();
  s.used_target_blocks = loads_.used_target_blocks();
  s.used_draft_blocks = loads_.used_draft_blocks();
  s.ranks = loads_.ranks();
  s.token_imbalance = current_.token_imbalance;
  s.instance_counters = loads_.instance_counters();
  s.counters = counters_;
  absl::MutexLock lock(&snapshot_mu_);
  snapshot_ = std::move(s);
}

ExecutorSnapshot Executor::Snapshot() const {
  absl::MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

}  // namespace lockstep::exec
