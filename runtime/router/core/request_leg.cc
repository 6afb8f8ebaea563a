// RequestRunner's worker calls on gRPC's callback API: one leg's Generate stream (read
// by a reactor, one response at a time, the next read started once the sink took the
// tokens) and the best-effort Cancel RPC. No thread waits on either.
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "common/log.h"
#include "fmt/format.h"
#include "grpcpp/grpcpp.h"
#include "runtime/router/core/migration.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/request_runner_call.h"

namespace lockstep::router {
namespace {

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

// One leg: owns itself from Begin until it hands its outcome to `done` (OnDone).
// A hold keeps the call open while no read is outstanding (the sink is taking tokens),
// so that OnDone comes only after the leg stopped reading (EndReading).
class RequestRunner::Leg : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Leg(RequestRunner& runner, CallPtr call, InstanceTarget target, v1::GenerateRequest request,
      LegDone done)
      : runner_(runner),
        call_(std::move(call)),
        target_(std::move(target)),
        request_(std::move(request)),
        done_(std::move(done)),
        context_(std::make_shared<grpc::ClientContext>()) {}

  void Begin() {
    FlowHandle& flow = *call_->flow;
    const uint64_t id = request_.request_id();
    context_->set_deadline(GrpcDeadline(call_->deadline - runner_.clock_.Now()));
    if (!flow.BeginLeg(target_.name, context_)) {
      out_.status = flow.cancel_reason();
      return Complete();
    }
    // The health monitor marks an instance unhealthy before cancelling the flows on
    // it, so a leg that began after that sees it here.
    if (!runner_.registry_.IsServing(target_.name)) {
      flow.CancelLeg(target_.name, absl::UnavailableError(fmt::format(
                                       "instance {} became unhealthy before request {} started",
                                       target_.name, id)));
    }
    if (runner_.options_.progress != nullptr) {
      responses_ = runner_.options_.progress->For(target_.name);
    }
    runner_.stubs_.Get(target_.address)->async()->Generate(context_.get(), &request_, this);
    AddHold();
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return EndReading();
    if (responses_ != nullptr) responses_->fetch_add(1, std::memory_order_relaxed);
    const v1::GenerateResponse& response = response_;
    Progress& progress = call_->progress;
    if (!rank_seen_ && (response.token_ids_size() > 0 || response.has_context())) {
      rank_seen_ = true;
      runner_.NoteServingRank(target_, request_, response.rank());
      // The leg that prefilled reports its prefix reuse with the first token (a
      // continuation's prompt holds the original one: Finish clamps to it).
      if (request_.type() != v1::REQUEST_TYPE_GENERATION_ONLY) {
        progress.cached_prompt_tokens = response.cached_prompt_tokens();
      }
    }
    if (response.has_drafts()) AddNewDrafts(response.drafts(), leg_drafts_, progress.drafts);
    if (response.finish_reason() == v1::FINISH_REASON_ERROR || response.error_code() != 0) {
      out_.status = StatusFromWorker(response.error_code(), response.error_message(),
                                     target_.name, request_.request_id());
      out_.finish_reason = v1::FINISH_REASON_ERROR;
      if (response.kv_pull_failed()) {
        out_.migrate = MigrationReason::kKvPullFailed;  // whatever its code (a late pull too)
      } else if (WorkerErrorMigrates(response.error_code())) {
        out_.migrate = MigrationReason::kWorkerError;
      }
      finished_ = true;
      return EndReading();
    }
    if (response.token_ids_size() == 0) return AfterTokens(SinkAction::kContinue);
    TokenDelta delta;
    delta.token_ids.assign(response.token_ids().begin(), response.token_ids().end());
    delta.logprobs.assign(response.logprobs().begin(), response.logprobs().end());
    // The sink may answer later, on another thread: nothing of this leg is touched
    // after this call (AfterTokens goes on).
    runner_.Deliver(*call_, delta, [this](SinkAction action) { AfterTokens(action); });
  }

  void OnDone(const grpc::Status& rpc) override {
    call_->flow->EndLeg();
    if (finished_) return Complete();
    if (stopped_) {
      // The output is complete; the worker need not go on.
      return runner_.CancelOnWorker(target_, request_.request_id(), [this] { Complete(); });
    }
    const uint64_t id = request_.request_id();
    FlowHandle& flow = *call_->flow;
    if (absl::Status cancel = flow.cancel_reason(); !cancel.ok()) {
      out_.status = std::move(cancel);
      // A client that left, or the router shutting down: stop the work on the worker
      // too (an unhealthy instance's legs end through leg_failure below, unasked: it
      // may not answer).
      return runner_.CancelOnWorker(target_, id, [this] { Complete(); });
    }
    if (absl::Status unhealthy = flow.leg_failure(); !unhealthy.ok()) {
      out_.status = std::move(unhealthy);
      out_.migrate = MigrationReason::kInstanceUnhealthy;
      return Complete();
    }
    // Past the leg's deadline the worker may end the stream first, and with another
    // code (CANCELLED): the deadline, not the instance, ended it.
    if (rpc.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
        std::chrono::system_clock::now() >= context_->deadline()) {
      out_.status = absl::DeadlineExceededError(
          fmt::format("request {} did not finish within {} s (on instance {})", id,
                      absl::ToInt64Seconds(runner_.options_.request_timeout), target_.name));
      return runner_.CancelOnWorker(target_, id, [this] { Complete(); });
    }
    out_.migrate = MigrationReason::kStreamBroken;
    if (!rpc.ok()) {
      out_.status = absl::UnavailableError(
          fmt::format("instance {} failed while serving request {}: {} (gRPC code {})",
                      target_.name, id, rpc.error_message(), static_cast<int>(rpc.error_code())));
    } else {
      out_.status = absl::UnavailableError(fmt::format(
          "instance {} ended the stream of request {} before it finished", target_.name, id));
    }
    Complete();
  }

 private:
  // The sink took the tokens of response_ (or it had none).
  void AfterTokens(SinkAction action) {
    if (action == SinkAction::kClientGone) {
      call_->flow->Cancel(absl::CancelledError("the client disconnected"));
      return EndReading();
    }
    if (action == SinkAction::kStop) {
      out_.finish_reason = v1::FINISH_REASON_STOP;
      finished_ = response_.finished();
      stopped_ = !finished_;
      return EndReading();
    }
    if (response_.finished()) {
      finished_ = true;
      out_.finish_reason = response_.finish_reason();
      if (response_.has_context()) out_.context = response_.context();
      if (out_.finish_reason == v1::FINISH_REASON_CANCELLED) {
        out_.status = absl::CancelledError(fmt::format("instance {} cancelled request {}",
                                                       target_.name, request_.request_id()));
      }
      return EndReading();
    }
    StartRead(&response_);
  }

  // Reads no more. A finished stream is closed by the worker; cancelling it could cost
  // a context leg its KV claim. Anything else is cancelled so that the call ends at
  // once. OnDone may run (on any thread) as soon as the hold is removed.
  void EndReading() {
    if (!finished_ || !out_.status.ok()) context_->TryCancel();
    RemoveHold();
  }

  void Complete() {
    LegDone done = std::move(done_);
    LegOutcome out = std::move(out_);
    delete this;
    done(std::move(out));
  }

  RequestRunner& runner_;
  const CallPtr call_;
  const InstanceTarget target_;
  const v1::GenerateRequest request_;
  LegDone done_;
  const std::shared_ptr<grpc::ClientContext> context_;  // shared with the flow
  v1::GenerateResponse response_;
  LegOutcome out_;
  bool finished_ = false;
  bool stopped_ = false;  // the sink reached a stop string before the worker finished
  bool rank_seen_ = false;
  v1::DraftTokens leg_drafts_;
  InstanceProgress::Counter responses_;  // the instance's, when counted
};

void RequestRunner::RunLeg(const CallPtr& call, const InstanceTarget& target,
                           v1::GenerateRequest request, LegDone done) {
  (new Leg(*this, call, target, std::move(request), std::move(done)))->Begin();
}

void RequestRunner::CancelOnWorker(const InstanceTarget& target, uint64_t request_id,
                                   std::function<void()> then) {
  struct Rpc {
    grpc::ClientContext context;
    v1::CancelRequest request;
    v1::CancelResponse response;
  };
  auto* rpc = new Rpc;  // owned by the callback, which runs once
  rpc->request.set_request_id(request_id);
  rpc->context.set_deadline(GrpcDeadline(options_.cancel_timeout));
  stubs_.Get(target.address)
      ->async()
      ->Cancel(&rpc->context, &rpc->request, &rpc->response,
               [rpc, name = target.name, request_id, then = std::move(then)](grpc::Status status) {
                 delete rpc;
                 if (!status.ok()) {
                   LOCKSTEP_LOG_INFO("router", "Cancel of request {} on {} failed: {}",
                                     request_id, name, status.error_message());
                 }
                 then();
               });
}

}  // namespace lockstep::router
