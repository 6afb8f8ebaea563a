#include "runtime/router/core/request_runner.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "fmt/format.h"
#include "grpcpp/grpcpp.h"
#include "runtime/config/sampling_wire.h"
#include "runtime/router/core/migration.h"
#include "runtime/router/routing/queue_limit.h"
#include "scheduler/continuation.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;

absl::Status StatusFromWorker(int32_t code, const std::string& message, const std::string& instance,
                              uint64_t request_id) {
  const absl::StatusCode status_code =
      code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kInternal;
  return absl::Status(
      status_code, fmt::format("instance {} failed request {}: {}", instance, request_id, message));
}

// Adds to `total` what a leg's cumulative drafts `now` have beyond `seen`, the leg's
// previous report, and remembers `now`.
void AddNewDrafts(const v1::DraftTokens& now, v1::DraftTokens& seen, v1::DraftTokens& total) {
  total.set_method(now.method());
  total.set_proposed(total.proposed() + now.proposed() - seen.proposed());
  total.set_accepted(total.accepted() + now.accepted() - seen.accepted());
  seen = now;
}

std::chrono::system_clock::time_point GrpcDeadline(absl::Duration remaining) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(absl::ToInt64Microseconds(remaining));
}

}  // namespace

struct RequestRunner::Progress {
  absl::Time start;
  absl::Time last_token;
  bool first_token_seen = false;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // reported by the latest leg that prefilled
  v1::DraftTokens drafts;            // summed over the legs
  // The tokens delivered to the sink, every leg and attempt (what a migration resumes
  // from).
  std::vector<int32_t> tokens;
  // When the last attempt failed, until the next token arrives (migration latency).
  std::optional<absl::Time> failed_at;
};

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
  RequestResult result;
  result.request_id = request_id;
  result.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  Progress progress;
  progress.start = clock_.Now();
  const absl::Time deadline = progress.start + options_.request_timeout;

  auto flow =
      std::make_shared<FlowHandle>(result.request_id, [&sink] { return sink.ClientConnected(); });
  flows_.Add(flow);
  metrics_.RunningDelta(+1);
  metrics_.QueueDelta(+1);
  metrics_.PromptTokens(result.prompt_tokens);
  RunRoute(*flow, request, deadline, progress, sink, result);
  flow->Detach();  // the sweeper may hold `flow` a while longer; `sink` goes away soon
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
  return result;
}

void RequestRunner::RunRoute(FlowHandle& flow, const RouterRequest& request, absl::Time deadline,
                             Progress& progress, TokenSink& sink, RequestResult& result) {
  const v1::GenerateRequest original =
      WireRequest(request.model, request.prompt, request.sampling, result.request_id);

  std::vector<std::string> attempts;  // each attempt's route, in order
  std::vector<std::string> failed;    // the instances excluded from later attempts
  v1::GenerateRequest wire = original;
  int migrations = 0;
  bool history_told = false;  // result.status already names the attempts
  for (;; ++migrations) {
    result.route.clear();
    const FailedLeg failure =
        RunAttempt(flow, request, wire, failed, deadline, progress, sink, result);
    if (!result.route.empty()) attempts.push_back(result.route);
    if (result.status.ok() || failure.reason == MigrationReason::kNone) break;
    if (OutputComplete(original, progress, result)) break;  // it failed after the last token
    if (!RetriesOnSameInstance(failure, failed)) failed.push_back(failure.instance);
    if (clock_.Now() >= deadline) {
      // The deadline covers every attempt: none starts after it.
      result.status = absl::DeadlineExceededError(fmt::format(
          "request {} did not finish within {} s ({})", result.request_id,
          absl::ToInt64Seconds(options_.request_timeout), std::string(result.status.message())));
      break;
    }
    result.status = MigrationVerdict(result.status, failure.reason, attempts, migrations,
                                     options_.migration_limit, CanRoute(failed),
                                     config::InstanceRoleName(failure.role));
    if (!result.status.ok()) {
      history_told = true;
      break;
    }
    const absl::Time now = clock_.Now();
    progress.failed_at = now;
    metrics_.Migration(MigrationReasonName(failure.reason));
    const sched::Continuation next =
        sched::ContinueAfter(request.prompt, request.sampling, progress.tokens);
    wire = WireRequest(request.model, next.prompt, next.sampling, NewRequestId());
    LOCKSTEP_LOG_WARN("router", "{}",
                      MigrationLogLine({.request_id = result.request_id,
                                        .instance = failure.instance,
                                        .reason = std::string(MigrationReasonName(failure.reason)),
                                        .delivered = static_cast<int64_t>(progress.tokens.size()),
                                        .continuation_id = wire.request_id()}));
  }
  result.route = absl::StrJoin(attempts, " => ");
  if (migrations == 0) return;
  if (result.status.ok()) {
    metrics_.MigratedRequestCompleted();
  } else if (!history_told) {
    // A later attempt ended the request for a reason that does not migrate (its
    // deadline, a queue limit, a validation error): the error still tells the history.
    result.status = AfterMigrations(result.status, attempts, migrations);
  }
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

RequestRunner::FailedLeg RequestRunner::RunAttempt(FlowHandle& flow, const RouterRequest& request,
                                                   v1::GenerateRequest wire,
                                                   absl::Span<const std::string> exclude,
                                                   absl::Time deadline, Progress& progress,
                                                   TokenSink& sink, RequestResult& result) {
  const uint64_t id = wire.request_id();
  auto failed_leg = [](const LegOutcome& leg, const std::string& instance, InstanceRole role) {
    return FailedLeg{leg.status.ok() ? MigrationReason::kNone : leg.migrate, instance, role};
  };
  if (registry_.HasHealthy(InstanceRole::kAggregated, exclude)) {
    absl::StatusOr<InstanceTarget> target =
        Route(InstanceRole::kAggregated, exclude, wire, /*by_prompt=*/true);
    if (!target.ok()) {
      result.status = target.status();
      return {};
    }
    result.route = target->name;
    wire.set_type(v1::REQUEST_TYPE_AGGREGATED);
    LegOutcome leg = RunLeg(flow, *target, wire, deadline, progress, sink);
    registry_.Release(target->name);
    result.status = leg.status;
    result.finish_reason = leg.finish_reason;
    return failed_leg(leg, target->name, InstanceRole::kAggregated);
  }
  if (!registry_.HasHealthy(InstanceRole::kContext, exclude) ||
      !registry_.HasHealthy(InstanceRole::kGeneration, exclude)) {
    result.status = absl::UnavailableError(fmt::format(
        "no healthy instance can serve model '{}': it needs an aggregated instance, or a "
        "context and a generation instance",
        request.model));
    return {};
  }

  // Leg 1: prefill on a context instance.
  absl::StatusOr<InstanceTarget> ctx = Route(InstanceRole::kContext, exclude, wire, true);
  if (!ctx.ok()) {
    result.status = ctx.status();
    return {};
  }
  result.route = ctx->name;
  wire.set_type(v1::REQUEST_TYPE_CONTEXT_ONLY);
  LegOutcome leg1 = RunLeg(flow, *ctx, wire, deadline, progress, sink);
  registry_.Release(ctx->name);
  if (!leg1.status.ok() || leg1.finish_reason != v1::FINISH_REASON_HANDOFF) {
    // Failed, or finished on the context instance (its first token ended the request).
    result.status = leg1.status;
    result.finish_reason = leg1.finish_reason;
    return failed_leg(leg1, ctx->name, InstanceRole::kContext);
  }
  if (!leg1.context.has_value()) {
    result.status = absl::InternalError(fmt::format(
        "context instance {} handed off request {} without a context handle", ctx->name, id));
    return {};
  }
  const v1::ContextResult& context = *leg1.context;
  const uint64_t claim_id = context.handle().context_request_id();

  // The first token reaches the client as soon as the context leg ends.
  TokenDelta first;
  first.token_ids.push_back(context.first_token_id());
  if (request.sampling.logprobs > 0 && context.has_first_logprobs()) {
    first.logprobs.push_back(context.first_logprobs());
  }
  const SinkAction action = Deliver(first, progress, sink);
  if (action == SinkAction::kClientGone) {
    flow.Cancel(absl::CancelledError("the client disconnected"));
    CancelOnWorker(*ctx, claim_id);
    result.status = flow.cancel_reason();
    return {};
  }
  if (action == SinkAction::kStop || progress.completion_tokens >= request.sampling.max_tokens) {
    CancelOnWorker(*ctx, claim_id);  // nothing left to generate: release the claim
    result.finish_reason =
        action == SinkAction::kStop ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH;
    return {};
  }

  // Leg 2: decode on a generation instance, which pulls the KV from the context rank.
  absl::StatusOr<InstanceTarget> gen = Route(InstanceRole::kGeneration, exclude, wire, false);
  if (!gen.ok()) {
    CancelOnWorker(*ctx, claim_id);
    result.status = gen.status();
    return {};
  }
  result.route = fmt::format("{}->{}", ctx->name, gen->name);
  wire.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
  *wire.mutable_context() = context;
  LegOutcome leg2 = RunLeg(flow, *gen, wire, deadline, progress, sink);
  registry_.Release(gen->name);
  if (!leg2.status.ok()) CancelOnWorker(*ctx, claim_id);  // the KV may not have moved
  result.status = leg2.status;
  result.finish_reason = leg2.finish_reason;
  // A failed pull blames the context instance (it may have died), never the generation
  // instance that reported it.
  if (leg2.migrate == MigrationReason::kKvPullFailed) {
    return failed_leg(leg2, ctx->name, InstanceRole::kContext);
  }
  return failed_leg(leg2, gen->name, InstanceRole::kGeneration);
}

RequestRunner::LegOutcome RequestRunner::RunLeg(FlowHandle& flow, const InstanceTarget& target,
                                                const v1::GenerateRequest& request,
                                                absl::Time deadline, Progress& progress,
                                                TokenSink& sink) {
  LegOutcome out;
  const uint64_t id = request.request_id();
  std::shared_ptr<v1::WorkerService::Stub> stub = stubs_.Get(target.address);
  grpc::ClientContext call;
  call.set_deadline(GrpcDeadline(deadline - clock_.Now()));
  if (!flow.BeginLeg(target.name, &call)) {
    out.status = flow.cancel_reason();
    return out;
  }
  // The health monitor marks an instance unhealthy before cancelling the flows on it,
  // so a leg that began after that sees it here.
  if (!registry_.IsServing(target.name)) {
    flow.CancelLeg(target.name,
                   absl::UnavailableError(fmt::format(
                       "instance {} became unhealthy before request {} started", target.name, id)));
  }
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub->Generate(&call, request);
  v1::GenerateResponse response;
  bool finished = false;
  bool stopped = false;  // the sink reached a stop string before the worker finished
  v1::DraftTokens leg_drafts;
  bool rank_seen = false;
  while (reader->Read(&response)) {
    if (!rank_seen && (response.token_ids_size() > 0 || response.has_context())) {
      rank_seen = true;
      NoteServingRank(target, request, response.rank());
      // The leg that prefilled reports its prefix reuse with the first token (a
      // continuation's prompt holds the original one: Run clamps to it).
      if (request.type() != v1::REQUEST_TYPE_GENERATION_ONLY) {
        progress.cached_prompt_tokens = response.cached_prompt_tokens();
      }
    }
    if (response.has_drafts()) AddNewDrafts(response.drafts(), leg_drafts, progress.drafts);
    if (response.finish_reason() == v1::FINISH_REASON_ERROR || response.error_code() != 0) {
      out.status =
          StatusFromWorker(response.error_code(), response.error_message(), target.name, id);
      out.finish_reason = v1::FINISH_REASON_ERROR;
      if (response.kv_pull_failed()) {
        out.migrate = MigrationReason::kKvPullFailed;  // whatever its code (a late pull too)
      } else if (WorkerErrorMigrates(response.error_code())) {
        out.migrate = MigrationReason::kWorkerError;
      }
      finished = true;
      break;
    }
    if (response.token_ids_size() > 0) {
      TokenDelta delta;
      delta.token_ids.assign(response.token_ids().begin(), response.token_ids().end());
      delta.logprobs.assign(response.logprobs().begin(), response.logprobs().end());
      const SinkAction action = Deliver(delta, progress, sink);
      if (action == SinkAction::kClientGone) {
        flow.Cancel(absl::CancelledError("the client disconnected"));
        break;
      }
      if (action == SinkAction::kStop) {
        out.finish_reason = v1::FINISH_REASON_STOP;
        finished = response.finished();
        stopped = !finished;
        break;
      }
    }
    if (response.finished()) {
      finished = true;
      out.finish_reason = response.finish_reason();
      if (response.has_context()) out.context = response.context();
      if (out.finish_reason == v1::FINISH_REASON_CANCELLED) {
        out.status =
            absl::CancelledError(fmt::format("instance {} cancelled request {}", target.name, id));
      }
      break;
    }
  }
  // A finished stream is closed by the worker; cancelling it could cost a context
  // leg its KV claim. Anything else is cancelled so that Finish returns at once.
  if (!finished || !out.status.ok()) call.TryCancel();
  const grpc::Status rpc = reader->Finish();
  flow.EndLeg();
  if (finished) return out;
  if (stopped) {
    CancelOnWorker(target, id);  // the output is complete; the worker need not go on
    return out;
  }

  const absl::Status cancel = flow.cancel_reason();
  if (!cancel.ok()) {
    out.status = cancel;
    // A client that left, or the router shutting down: stop the work on the worker too
    // (an unhealthy instance's legs end through leg_failure below, unasked: it may not
    // answer).
    CancelOnWorker(target, id);
    return out;
  }
  if (absl::Status unhealthy = flow.leg_failure(); !unhealthy.ok()) {
    out.status = std::move(unhealthy);
    out.migrate = MigrationReason::kInstanceUnhealthy;
    return out;
  }
  // Past the leg's deadline the worker may end the stream first, and with another code
  // (CANCELLED): the deadline, not the instance, ended it.
  if (rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      std::chrono::system_clock::now() >= call.deadline()) {
    out.status = absl::DeadlineExceededError(
        fmt::format("request {} did not finish within {} s (on instance {})", id,
                    absl::ToInt64Seconds(options_.request_timeout), target.name));
    CancelOnWorker(target, id);
  } else if (!rpc.ok()) {
    out.migrate = MigrationReason::kStreamBroken;
    out.status = absl::UnavailableError(
        fmt::format("instance {} failed while serving request {}: {} (gRPC code {})", target.name,
                    id, rpc.error_message(), static_cast<int>(rpc.error_code())));
  } else {
    out.migrate = MigrationReason::kStreamBroken;
    out.status = absl::UnavailableError(fmt::format(
        "instance {} ended the stream of request {} before it finished", target.name, id));
  }
  return out;
}

SinkAction RequestRunner::Deliver(const TokenDelta& delta, Progress& progress, TokenSink& sink) {
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
  return sink.OnTokens(delta);
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

void RequestRunner::CancelOnWorker(const InstanceTarget& target, uint64_t request_id) {
  v1::CancelRequest request;
  request.set_request_id(request_id);
  v1::CancelResponse response;
  grpc::ClientContext call;
  call.set_deadline(GrpcDeadline(options_.cancel_timeout));
  const grpc::Status status = stubs_.Get(target.address)->Cancel(&call, request, &response);
  if (!status.ok()) {
    LOCKSTEP_LOG_INFO("router", "Cancel of request {} on {} failed: {}", request_id, target.name,
                      status.error_message());
  }
}

}  // namespace lockstep::router
