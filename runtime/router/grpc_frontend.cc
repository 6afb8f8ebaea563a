#include "runtime/router/grpc_frontend.h"

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/alarm.h"

#include "common/grpc_status.h"
#include "common/log.h"
#include "fmt/format.h"
#include "runtime/config/role_wire.h"
#include "runtime/config/sampling_wire.h"
#include "runtime/router/text/generated_text.h"

namespace lockstep::router {
namespace {

using Writer = grpc::ServerWriter<v1::RouterGenerateResponse>;

// Streams a request's tokens (and their text, cut at the request's stop strings) to a
// gRPC client. OnTokens runs on the request's thread, ClientConnected on the sweeper's,
// which cancels the call when a write has been pending for `write_timeout`.
class GrpcSink : public TokenSink {
 public:
  GrpcSink(grpc::ServerContext& context, Writer& writer, const ServingTokenizer& tokenizer,
           const RouterRequest& request, uint64_t request_id, Clock& clock,
           absl::Duration write_timeout)
      : context_(context),
        writer_(writer),
        text_(tokenizer, request.stop),
        request_id_(request_id),
        clock_(clock),
        write_timeout_(write_timeout) {}

  SinkAction OnTokens(const TokenDelta& delta) override {
    v1::RouterGenerateResponse response;
    response.set_request_id(request_id_);
    response.mutable_token_ids()->Assign(delta.token_ids.begin(), delta.token_ids.end());
    response.set_text(text_.Push(delta.token_ids));
    for (const v1::TokenLogprobs& lp : delta.logprobs) *response.add_logprobs() = lp;
    write_started_.store(absl::ToUnixNanos(clock_.Now()));
    const bool written = writer_.Write(response);
    write_started_.store(kNoWrite);
    if (!written) return SinkAction::kClientGone;
    return text_.stopped() ? SinkAction::kStop : SinkAction::kContinue;
  }

  bool ClientConnected() override {
    const int64_t started = write_started_.load();
    if (started != kNoWrite &&
        clock_.Now() - absl::FromUnixNanos(started) >= write_timeout_) {
      LOCKSTEP_LOG_WARN("router", "request {}: a gRPC client read nothing for {} ms; cancelling",
                        request_id_, absl::ToInt64Milliseconds(write_timeout_));
      context_.TryCancel();  // the pending Write returns false
      return false;
    }
    return !context_.IsCancelled();
  }

  std::string FlushText() { return text_.Finish(); }

 private:
  static constexpr int64_t kNoWrite = std::numeric_limits<int64_t>::min();

  grpc::ServerContext& context_;
  Writer& writer_;
  GeneratedText text_;
  const uint64_t request_id_;
  Clock& clock_;
  const absl::Duration write_timeout_;
  std::atomic<int64_t> write_started_{kNoWrite};  // Unix ns of the pending write
};

// Writes `response`; when the write is still pending after `timeout` (a client that
// stopped reading), an alarm cancels the call, which makes the write return false.
bool WriteWithin(grpc::ServerContext& context, Writer& writer,
                 const v1::RouterGenerateResponse& response, absl::Duration timeout) {
  // What the alarm may still touch after we return: nothing once `context` is cleared.
  struct Guard {
    absl::Mutex mu;
    grpc::ServerContext* context ABSL_GUARDED_BY(mu);
  };
  auto guard = std::make_shared<Guard>();
  {
    absl::MutexLock lock(&guard->mu);
    guard->context = &context;
  }
  grpc::Alarm alarm;
  alarm.Set(std::chrono::system_clock::now() +
                std::chrono::microseconds(absl::ToInt64Microseconds(timeout)),
            [guard](bool fired) {
              absl::MutexLock lock(&guard->mu);
              if (fired && guard->context != nullptr) guard->context->TryCancel();
            });
  const bool written = writer.Write(response);
  {
    absl::MutexLock lock(&guard->mu);
    guard->context = nullptr;
  }
  alarm.Cancel();
  return written;
}

}  // namespace

GrpcFrontend::GrpcFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
                           RouterMetrics& metrics, const ServingTokenizer& tokenizer,
                           Clock& clock)
    : options_(std::move(options)),
      runner_(runner),
      registry_(registry),
      metrics_(metrics),
      tokenizer_(tokenizer),
      clock_(clock) {}

grpc::Status GrpcFrontend::Generate(grpc::ServerContext* context,
                                    const v1::RouterGenerateRequest* request,
                                    grpc::ServerWriter<v1::RouterGenerateResponse>* writer) {
  // The same API key as the HTTP API (docs/security.md).
  const auto authorization = context->client_metadata().find("authorization");
  if (!options_.api_keys.AllowsAuthorization(
          authorization == context->client_metadata().end()
              ? std::string_view()
              : std::string_view(authorization->second.data(), authorization->second.size()))) {
    metrics_.Unauthorized();
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "Incorrect or missing API key; send metadata authorization: Bearer <key>");
  }
  const Admission::Ticket call = options_.generate_calls->TryAdmit();  // held until we return
  const Admission::Ticket ticket = call != nullptr ? options_.admission->TryAdmit() : nullptr;
  if (ticket == nullptr) {
    const absl::Status refused = call == nullptr ? options_.generate_calls->RefusalStatus()
                                                 : options_.admission->RefusalStatus();
    metrics_.Refused(kAdmissionReason);
    metrics_.RequestFinished(refused);
    return ToGrpcStatus(refused);
  }
  RouterRequest routed;
  routed.model = request->model();
  if (request->has_tokens()) {
    routed.prompt.assign(request->tokens().ids().begin(), request->tokens().ids().end());
  } else {
    routed.prompt = tokenizer_.Encode(request->text());
  }
  routed.sampling = config::SamplingFromWire(request->sampling());
  routed.stop.assign(request->stop().begin(), request->stop().end());
  absl::Status status = ValidateRouterRequest(routed, options_.limits);
  if (status.ok()) status = runner_.CheckRoute(options_.limits.model);
  if (!status.ok()) {
    metrics_.RequestFinished(status);
    const std::string param = ParamOf(status);
    return ToGrpcStatus(
        param.empty() ? status
                      : absl::Status(status.code(),
                                     fmt::format("{}: {}", param, std::string(status.message()))));
  }
  const uint64_t id = runner_.NewRequestId();
  GrpcSink sink(*context, *writer, tokenizer_, routed, id, clock_, options_.write_timeout);
  const RequestResult result = runner_.Run(routed, id, sink);
  if (!result.status.ok()) return ToGrpcStatus(result.status);
  v1::RouterGenerateResponse last;
  last.set_request_id(id);
  last.set_text(sink.FlushText());
  last.set_finished(true);
  last.set_finish_reason(result.finish_reason);
  last.set_prompt_tokens(static_cast<int32_t>(result.prompt_tokens));
  last.set_completion_tokens(static_cast<int32_t>(result.completion_tokens));
  last.set_cached_prompt_tokens(static_cast<int32_t>(result.cached_prompt_tokens));
  if (result.drafts.proposed() > 0) *last.mutable_drafts() = result.drafts;
  if (!WriteWithin(*context, *writer, last, options_.write_timeout)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading its stream");
  }
  return grpc::Status::OK;
}

grpc::Status GrpcFrontend::ListInstances(grpc::ServerContext*, const v1::ListInstancesRequest*,
                                         v1::ListInstancesResponse* response) {
  for (const InstanceState& state : registry_.Snapshot()) {
    v1::InstanceInfo* info = response->add_instances();
    info->set_name(state.name);
    info->set_role(config::RoleToWire(state.role));
    info->set_world_size(state.world_size);
    info->set_leader_address(state.address);
    info->set_model(state.model);
    info->set_healthy(state.health == InstanceHealth::kHealthy);
    info->set_state(std::string(InstanceHealthName(state.health)));
    info->set_reason(state.reason);
    info->set_registered(state.registered);
    info->mutable_load()->set_active_requests(state.load.active_requests);
    info->mutable_load()->set_queued_requests(state.load.queued_requests);
    info->mutable_load()->set_free_blocks(state.load.free_blocks);
    info->set_router_in_flight(state.in_flight);
    if (state.last_heartbeat != absl::InfinitePast()) {
      info->set_last_heartbeat_unix_nanos(absl::ToUnixNanos(state.last_heartbeat));
    }
  }
  return grpc::Status::OK;
}

grpc::Status GrpcFrontend::Register(grpc::ServerContext*, const v1::RegisterRequest* request,
                                    v1::RegisterResponse* response) {
  absl::StatusOr<config::InstanceRole> role = config::RoleFromWire(request->role());
  absl::Status status = role.status();
  if (status.ok()) {
    status = registry_.Register(request->instance(), *role, request->world_size(),
                                request->leader_address(), request->model());
  }
  if (!status.ok()) {
    LOCKSTEP_LOG_WARN("router", "refused registration of '{}': {}", request->instance(),
                      status.ToString());
    return ToGrpcStatus(status);
  }
  LOCKSTEP_LOG_INFO("router", "instance {} ({}, DEP{}) registered at {}", request->instance(),
                    config::InstanceRoleName(*role), request->world_size(),
                    request->leader_address());
  response->set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(options_.heartbeat_timeout));
  return grpc::Status::OK;
}

grpc::Status GrpcFrontend::Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                                     v1::HeartbeatResponse* response) {
  LoadReport load{request->load().active_requests(), request->load().queued_requests(),
                  request->load().free_blocks()};
  response->set_reregister(!registry_.Heartbeat(request->instance(), load));
  return grpc::Status::OK;
}

grpc::Status GrpcFrontend::ReportKvEvents(grpc::ServerContext*,
                                          const v1::ReportKvEventsRequest* request,
                                          v1::ReportKvEventsResponse* response) {
  if (options_.kv_routing == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this router keeps no KV index");
  }
  // The ranks a report names index per-rank state (and size vectors): only the
  // instance's own.
  std::vector<int32_t> ranks;
  for (const v1::KvEventSnapshot& s : request->snapshots()) ranks.push_back(s.rank());
  for (const v1::KvEventBatch& b : request->batches()) ranks.push_back(b.rank());
  if (absl::Status checked =
          registry_.CheckRanks(request->instance(), request->world_size(), ranks);
      !checked.ok()) {
    return ToGrpcStatus(absl::Status(
        checked.code(), fmt::format("ReportKvEvents: {}", std::string(checked.message()))));
  }
  absl::StatusOr<v1::ReportKvEventsResponse> answer = options_.kv_routing->Apply(*request);
  if (!answer.ok()) return ToGrpcStatus(answer.status());
  *response = *std::move(answer);
  return grpc::Status::OK;
}

}  // namespace lockstep::router
