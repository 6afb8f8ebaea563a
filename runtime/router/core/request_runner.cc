#include "runtime/router/core/request_runner.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "fmt/format.h"
#include "runtime/config/sampling_wire.h"
#include "runtime/router/core/migration.h"
#include "runtime/router/routing/queue_limit.h"
#include "runtime/router/core/request_runner_call.h"
#include "scheduler/continuation.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;

}  // namespace

namespace {

// Hands a blocking Run's tokens to the thread that called Run, which gives them to its
// sink (TokenSink::OnTokens runs on the request's thread, as it always did) while the
// gRPC callback threads go on with other requests.
class RelaySink : public TokenSink {
 public:
  explicit RelaySink(TokenSink& sink) : sink_(sink) {}
  SinkAction OnTokens(const TokenDelta& delta) override { return sink_.OnTokens(delta); }
  void OnTokensAsync(const TokenDelta& delta, std::function<void(SinkAction)> done) override {
    absl::MutexLock lock(&mu_);
    queue_.push_back({delta, std::move(done)});
  }
  bool ClientConnected() override { return sink_.ClientConnected(); }
  void Done(RequestResult result) {
    absl::MutexLock lock(&mu_);
    result_ = std::move(result);
  }
  // Delivers the queued tokens until the request is done. The wait is bounded by the
  // request: every leg has the request's deadline.
  RequestResult Wait() {
    for (;;) {
      Item item;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](RelaySink* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
              return !self->queue_.empty() || self->result_.has_value();
            },
            this));
        if (queue_.empty()) return *std::move(result_);
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      item.done(sink_.OnTokens(item.delta));
    }
  }

 private:
  struct Item {
    TokenDelta delta;
    std::function<void(SinkAction)> done;
  };
  TokenSink& sink_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<RequestResult> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

RequestRunner::RequestRunner(Options options, InstanceRegistry& registry, WorkerStubs& stubs,
                             FlowTracker& flows, RouterMetrics& metrics, Clock& clock)
    : options_(options),
      registry_(registry),
      stubs_(stubs),
      flows_(flows),
      metrics_(metrics),
      clock_(clock),
      // Ids stay unique across router restarts: they start at the current time in µs.
      next_request_id_(static_cast<uint64_t>(absl::ToUnixMicros(clock.Now()))) {}

RequestRunner::~RequestRunner() {
  // The requests still in flight refer to the runner; their flows were ended, so each
  // ends within a Cancel RPC's deadline (or its request's, at worst).
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* n) { return *n == 0; }, &in_flight_));
}

int64_t RequestRunner::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool RequestRunner::CanRoute(absl::Span<const std::string> exclude) const {
  return registry_.HasHealthy(InstanceRole::kAggregated, exclude) ||
         (registry_.HasHealthy(InstanceRole::kContext, exclude) &&
          registry_.HasHealthy(InstanceRole::kGeneration, exclude));
}

absl::Status RequestRunner::CheckRoute(std::string_view model) {
  if (!CanRoute()) {
    return absl::UnavailableError(
        fmt::format("no healthy instance can serve model '{}' now; retry later", model));
  }
  // The roles of the route RunAttempt takes: aggregated when there is one.
  const std::vector<InstanceRole> roles =
      registry_.HasHealthy(InstanceRole::kAggregated)
          ? std::vector<InstanceRole>{InstanceRole::kAggregated}
          : std::vector<InstanceRole>{InstanceRole::kContext, InstanceRole::kGeneration};
  for (const InstanceRole role : roles) {
    if (!registry_.HasRoom(role)) {
      metrics_.Refused(kQueueFullReason);
      return QueueFullStatus(config::InstanceRoleName(role), options_.max_queued_requests);
    }
  }
  return absl::OkStatus();
}

RequestResult RequestRunner::Run(const RouterRequest& request, uint64_t request_id,
                                 TokenSink& sink) {
  RelaySink relay(sink);
  Start(request, request_id, relay, [&relay](RequestResult result) { relay.Done(std::move(result)); });
  return relay.Wait();
}

void RequestRunner::Start(const RouterRequest& request, uint64_t request_id, TokenSink& sink,
                          std::function<void(RequestResult)> done) {
  {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  auto call = std::make_shared<Call>();
  call->request = request;
  call->sink = &sink;
  call->done = std::move(done);
  RequestResult& result = call->result;
  result.request_id = request_id;
  result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  call->progress.start = clock_.Now();
  call->deadline = call->progress.start + options_.request_timeout;
  call->flow =
      std::make_shared<FlowHandle>(request_id, [&sink] { return sink.ClientConnected(); });
  flows_.Add(call->flow);
  metrics_.RunningDelta(+1);
  metrics_.QueueDelta(+1);
  metrics_.PromptTokens(result.prompt_tokens);
  call->original = WireRequest(request.model, request.prompt, request.sampling, request_id);
  call->wire = call->original;
  StartAttempt(call);
}

void RequestRunner::StartAttempt(const CallPtr& call) {
  call->result.route.clear();
  RunAttempt(call, [this, call](FailedLeg failure) { AttemptDone(call, failure); });
}

void RequestRunner::AttemptDone(const CallPtr& call, const FailedLeg& failure) {
  RequestResult& result = call->result;
  Progress& progress = call->progress;
  if (!result.route.empty()) call->attempts.push_back(result.route);
  if (result.status.ok() || failure.reason == MigrationReason::kNone) return Finish(call);
  // It failed after the last token.
  if (OutputComplete(call->original, progress, result)) return Finish(call);
  if (!RetriesOnSameInstance(failure, call->failed)) call->failed.push_back(failure.instance);
  if (clock_.Now() >= call->deadline) {
    // The deadline covers every attempt: none starts after it.
    result.status = absl::DeadlineExceededError(fmt::format(
        "request {} did not finish within {} s ({})", result.request_id,
        absl::ToInt64Seconds(options_.request_timeout), std::string(result.status.message())));
    return Finish(call);
  }
  result.status = MigrationVerdict(result.status, failure.reason, call->attempts,
                                   call->migrations, options_.migration_limit,
                                   CanRoute(call->failed), config::InstanceRoleName(failure.role));
  if (!result.status.ok()) {
    call->history_told = true;
    return Finish(call);
  }
  const absl::Time now = clock_.Now();
  progress.failed_at = now;
  metrics_.Migration(MigrationReasonName(failure.reason));
  const RouterRequest& request = call->request;
  const sched::Continuation next =
      sched::ContinueAfter(request.prompt, request.sampling, progress.tokens);
  call->wire = WireRequest(request.model, next.prompt, next.sampling, NewRequestId());
  LOCKSTEP_LOG_WARN("router", "{}",
                    MigrationLogLine({.request_id = result.request_id,
                                      .instance = failure.instance,
                                      .reason = std::string(MigrationReasonName(failure.reason)),
                                      .delivered = static_cast<int64_t>(progress.tokens.size()),
                                      .continuation_id = call->wire.request_id()}));
  ++call->migrations;
  StartAttempt(call);
}

void RequestRunner::Finish(const CallPtr& call) {
  RequestResult& result = call->result;
  Progress& progress = call->progress;
  result.route = absl::StrJoin(call->attempts, " => ");
  if (call->migrations > 0) {
    if (result.status.ok()) {
      metrics_.MigratedRequestCompleted();
    } else if (!call->history_told) {
      // A later attempt ended the request for a reason that does not migrate (its
      // deadline, a queue limit, a validation error): the error still tells the history.
      result.status = AfterMigrations(result.status, call->attempts, call->migrations);
    }
  }
  call->flow->Detach();  // the sweeper may hold the flow a while longer; the sink goes soon
  flows_.Remove(result.request_id);
  if (!progress.first_token_seen) metrics_.QueueDelta(-1);
  metrics_.RunningDelta(-1);
  metrics_.RequestDuration(clock_.Now() - progress.start);
  metrics_.RequestFinished(result.status);
  metrics_.RequestDrafts(progress.drafts);
  result.completion_tokens = progress.completion_tokens;
  // A worker's count is bounded by the original prompt (a negative one reads as none).
  result.cached_prompt_tokens =
      std::clamp<int64_t>(progress.cached_prompt_tokens, 0, result.prompt_tokens);
  result.drafts = progress.drafts;
  if (!result.status.ok()) {
    LOCKSTEP_LOG_WARN("router", "request {} via {} ended: {}", result.request_id,
                      result.route.empty() ? "-" : result.route, result.status.ToString());
  }
  std::function<void(RequestResult)> done = std::move(call->done);
  done(std::move(result));
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

bool RequestRunner::RetriesOnSameInstance(const FailedLeg& failure,
                                          absl::Span<const std::string> failed) const {
  if (failure.reason != MigrationReason::kKvPullFailed) return false;
  std::vector<std::string> without(failed.begin(), failed.end());
  without.push_back(failure.instance);
  return registry_.IsHealthy(failure.instance) &&
         !registry_.HasHealthy(InstanceRole::kContext, without);
}

v1::GenerateRequest RequestRunner::WireRequest(const std::string& model,
                                               absl::Span<const int32_t> prompt,
                                               const sched::SamplingParams& sampling,
                                               uint64_t id) const {
  v1::GenerateRequest wire;
  wire.set_request_id(id);
  wire.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  config::SamplingToWire(sampling, wire.mutable_sampling());
  if (!sampling.ignore_eos) {
    for (int32_t eos : options_.eos_token_ids) wire.mutable_sampling()->add_stop_token_ids(eos);
  }
  wire.set_model(model);
  return wire;
}

bool RequestRunner::OutputComplete(const v1::GenerateRequest& original, const Progress& progress,
                                   RequestResult& result) const {
  const v1::SamplingParams& sampling = original.sampling();
  const int64_t n = static_cast<int64_t>(progress.tokens.size());
  if (n >= sampling.max_tokens()) {
    result.finish_reason = v1::FINISH_REASON_LENGTH;
  } else if (n > 0 && n >= sampling.min_tokens() &&
             absl::c_linear_search(sampling.stop_token_ids(), progress.tokens.back())) {
    result.finish_reason = v1::FINISH_REASON_STOP;
  } else {
    return false;
  }
  result.status = absl::OkStatus();
  return true;
}

RequestRunner::FailedLeg RequestRunner::LegFailure(const absl::Status& status,
                                                   MigrationReason migrate,
                                                   const std::string& instance, InstanceRole role) {
  return {status.ok() ? MigrationReason::kNone : migrate, instance, role};
}

void RequestRunner::RunAttempt(const CallPtr& call, FailedLegDone done) {
  RequestResult& result = call->result;
  v1::GenerateRequest& wire = call->wire;
  const std::vector<std::string>& exclude = call->failed;
  if (registry_.HasHealthy(InstanceRole::kAggregated, exclude)) {
    absl::StatusOr<InstanceTarget> target =
        Route(InstanceRole::kAggregated, exclude, wire, /*by_prompt=*/true);
    if (!target.ok()) {
      result.status = target.status();
      return done({});
    }
    result.route = target->name;
    wire.set_type(v1::REQUEST_TYPE_AGGREGATED);
    const std::string name = target->name;
    return RunLeg(call, *target, wire, [this, call, name, done = std::move(done)](LegOutcome leg) {
      registry_.Release(name);
      call->result.status = leg.status;
      call->result.finish_reason = leg.finish_reason;
      done(LegFailure(leg.status, leg.migrate, name, InstanceRole::kAggregated));
    });
  }
  if (!registry_.HasHealthy(InstanceRole::kContext, exclude) ||
      !registry_.HasHealthy(InstanceRole::kGeneration, exclude)) {
    result.status = absl::UnavailableError(fmt::format(
        "no healthy instance can serve model '{}': it needs an aggregated instance, or a "
        "context and a generation instance",
        call->request.model));
    return done({});
  }

  // Leg 1: prefill on a context instance.
  absl::StatusOr<InstanceTarget> ctx = Route(InstanceRole::kContext, exclude, wire, true);
  if (!ctx.ok()) {
    result.status = ctx.status();
    return done({});
  }
  result.route = ctx->name;
  wire.set_type(v1::REQUEST_TYPE_CONTEXT_ONLY);
  RunLeg(call, *ctx, wire,
         [this, call, ctx = *ctx, done = std::move(done)](LegOutcome leg1) mutable {
           registry_.Release(ctx.name);
           AfterContextLeg(call, ctx, std::move(leg1), std::move(done));
         });
}

void RequestRunner::AfterContextLeg(const CallPtr& call, const InstanceTarget& ctx,
                                    LegOutcome leg1, FailedLegDone done) {
  RequestResult& result = call->result;
  const uint64_t id = call->wire.request_id();
  if (!leg1.status.ok() || leg1.finish_reason != v1::FINISH_REASON_HANDOFF) {
    // Failed, or finished on the context instance (its first token ended the request).
    result.status = leg1.status;
    result.finish_reason = leg1.finish_reason;
    return done(LegFailure(leg1.status, leg1.migrate, ctx.name, InstanceRole::kContext));
  }
  if (!leg1.context.has_value()) {
    result.status = absl::InternalError(fmt::format(
        "context instance {} handed off request {} without a context handle", ctx.name, id));
    return done({});
  }
  auto context = std::make_shared<v1::ContextResult>(*std::move(leg1.context));
  const uint64_t claim_id = context->handle().context_request_id();

  // The first token reaches the client as soon as the context leg ends.
  TokenDelta first;
  first.token_ids.push_back(context->first_token_id());
  if (call->request.sampling.logprobs > 0 && context->has_first_logprobs()) {
    first.logprobs.push_back(context->first_logprobs());
  }
  Deliver(*call, first, [this, call, ctx, context, claim_id,
                         done = std::move(done)](SinkAction action) mutable {
    RequestResult& result = call->result;
    if (action == SinkAction::kClientGone) {
      call->flow->Cancel(absl::CancelledError("the client disconnected"));
      result.status = call->flow->cancel_reason();
      return CancelOnWorker(ctx, claim_id, [done = std::move(done)] { done({}); });
    }
    if (action == SinkAction::kStop ||
        call->progress.completion_tokens >= call->request.sampling.max_tokens) {
      result.finish_reason =
          action == SinkAction::kStop ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH;
      // Nothing left to generate: release the claim.
      return CancelOnWorker(ctx, claim_id, [done = std::move(done)] { done({}); });
    }

    // Leg 2: decode on a generation instance, which pulls the KV from the context rank.
    v1::GenerateRequest& wire = call->wire;
    absl::StatusOr<InstanceTarget> gen = Route(InstanceRole::kGeneration, call->failed, wire, false);
    if (!gen.ok()) {
      result.status = gen.status();
      return CancelOnWorker(ctx, claim_id, [done = std::move(done)] { done({}); });
    }
    result.route = fmt::format("{}->{}", ctx.name, gen->name);
    wire.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
    *wire.mutable_context() = *context;
    const std::string gen_name = gen->name;
    RunLeg(call, *gen, wire,
           [this, call, ctx, claim_id, gen_name, done = std::move(done)](LegOutcome leg2) mutable {
             registry_.Release(gen_name);
             call->result.status = leg2.status;
             call->result.finish_reason = leg2.finish_reason;
             // A failed pull blames the context instance (it may have died), never the
             // generation instance that reported it.
             const FailedLeg failure =
                 leg2.migrate == MigrationReason::kKvPullFailed
                     ? LegFailure(leg2.status, leg2.migrate, ctx.name, InstanceRole::kContext)
                     : LegFailure(leg2.status, leg2.migrate, gen_name,
                                  InstanceRole::kGeneration);
             if (leg2.status.ok()) return done(failure);
             // The KV may not have moved.
             CancelOnWorker(ctx, claim_id, [done = std::move(done), failure] { done(failure); });
           });
  });
}

void RequestRunner::Deliver(Call& call, const TokenDelta& delta,
                            std::function<void(SinkAction)> then) {
  Progress& progress = call.progress;
  const absl::Time now = clock_.Now();
  const int64_t n = static_cast<int64_t>(delta.token_ids.size());
  if (!progress.first_token_seen) {
    progress.first_token_seen = true;
    metrics_.TimeToFirstToken(now - progress.start);
    metrics_.QueueDelta(-1);
  } else if (n > 0) {
    const absl::Duration per_token = (now - progress.last_token) / n;
    for (int64_t i = 0; i < n; ++i) metrics_.InterTokenLatency(per_token);
  }
  if (progress.failed_at.has_value() && n > 0) {
    metrics_.MigrationLatency(now - *progress.failed_at);
    progress.failed_at.reset();
  }
  progress.last_token = now;
  progress.completion_tokens += n;
  progress.tokens.insert(progress.tokens.end(), delta.token_ids.begin(), delta.token_ids.end());
  metrics_.GeneratedTokens(n);
  call.sink->OnTokensAsync(delta, std::move(then));
}

absl::StatusOr<InstanceTarget> RequestRunner::Route(InstanceRole role,
                                                    absl::Span<const std::string> exclude,
                                                    v1::GenerateRequest& wire, bool by_prompt) {
  const auto& prompt = wire.prompt_token_ids();
  absl::StatusOr<InstanceTarget> target = registry_.Acquire(
      role, exclude,
      by_prompt ? absl::MakeConstSpan(prompt.data(), static_cast<size_t>(prompt.size()))
                : absl::Span<const int32_t>());
  wire.clear_rank_hint();
  if (IsQueueFull(target.status())) metrics_.Refused(kQueueFullReason);
  if (!target.ok()) return target;
  metrics_.RoutingDecision(target->reason);
  if (target->rank_hint >= 0) wire.set_rank_hint(target->rank_hint);
  return target;
}

void RequestRunner::NoteServingRank(const InstanceTarget& target,
                                    const v1::GenerateRequest& request, int32_t rank) {
  if (request.has_rank_hint()) metrics_.RankHint(rank == request.rank_hint());
  if (rank >= 0 && static_cast<size_t>(rank) < target.cached_by_rank.size()) {
    metrics_.PrefixCached(target.cached_by_rank[static_cast<size_t>(rank)]);
  }
}

}  // namespace lockstep::router
