#include "runtime/router/testing/fake_worker.h"

#include <algorithm>
#include <chrono>

#include "common/grpc_status.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "runtime/config/message_limits.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/token_checked_service.h"

namespace lockstep::router::testing {
namespace {

// Bounds every wait of a stalled stream, so a broken test cannot hang.
constexpr absl::Duration kMaxStall = absl::Seconds(30);

void SetDeadline(grpc::ClientContext& call, absl::Duration timeout) {
  call.set_deadline(std::chrono::system_clock::now() +
                    std::chrono::microseconds(absl::ToInt64Microseconds(timeout)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FakeWorker>> FakeWorker::Start(Options options) {
  auto worker = std::unique_ptr<FakeWorker>(new FakeWorker(std::move(options)));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(worker->options_.listen, security::ServerTransportCredentials(), &port);
  builder.SetMaxReceiveMessageSize(config::GrpcMessageLimit(
      config::MaxGenerateRequestBytes(worker->options_.max_prompt_tokens)));
  worker->checked_service_ = security::RequireClusterToken<v1::WorkerService>(worker.get());
  builder.RegisterService(worker->checked_service_.get());
  worker->server_ = builder.BuildAndStart();
  if (worker->server_ == nullptr || port <= 0) {
    return absl::UnavailableError(
        fmt::format("fake worker: cannot start a gRPC server on {}", worker->options_.listen));
  }
  ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(worker->options_.listen));
  worker->address_ = listen.WithPort(port).ToString();
  return worker;
}

FakeWorker::~FakeWorker() {
  StopHeartbeats();
  Shutdown();
}

int32_t FakeWorker::TokenAt(const std::vector<int32_t>& prompt, int position) {
  int64_t sum = 0;
  for (int32_t id : prompt) sum += id;
  return 'a' + static_cast<int32_t>((sum + 7 * position) % 26);
}

std::string FakeWorker::ExpectedText(const std::string& prompt, int max_tokens) {
  std::vector<int32_t> ids;
  for (char c : prompt) ids.push_back(static_cast<uint8_t>(c));
  std::string text;
  for (int p = 0; p < max_tokens; ++p) text += static_cast<char>(TokenAt(ids, p));
  return text;
}

std::unique_ptr<v1::RouterService::Stub> FakeWorker::RouterStub(const std::string& router_address) {
  return v1::RouterService::NewStub(security::CreateChannel(router_address));
}

absl::Status FakeWorker::Register(const std::string& router_address) {
  v1::RegisterRequest request;
  request.set_instance(options_.name);
  request.set_role(options_.role);
  request.set_world_size(options_.world_size);
  request.set_leader_address(address_);
  request.set_model(options_.model);
  v1::RegisterResponse response;
  grpc::ClientContext call;
  SetDeadline(call, absl::Seconds(5));
  grpc::Status status = RouterStub(router_address)->Register(&call, request, &response);
  return FromGrpcStatus(status);
}

absl::StatusOr<bool> FakeWorker::Heartbeat(const std::string& router_address) {
  v1::HeartbeatRequest request;
  request.set_instance(options_.name);
  request.mutable_load()->set_free_blocks(100);
  v1::HeartbeatResponse response;
  grpc::ClientContext call;
  SetDeadline(call, absl::Seconds(5));
  grpc::Status status = RouterStub(router_address)->Heartbeat(&call, request, &response);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return response.reregister();
}

void FakeWorker::StartHeartbeats(const std::string& router_address, absl::Duration interval) {
  StopHeartbeats();
  heartbeat_stop_ = std::make_unique<absl::Notification>();
  heartbeat_thread_ = std::thread([this, router_address, interval] {
    while (!heartbeat_stop_->WaitForNotificationWithTimeout(interval)) {
      absl::StatusOr<bool> reregister = Heartbeat(router_address);
      if (reregister.ok() && *reregister) Register(router_address).IgnoreError();
    }
  });
}

void FakeWorker::StopHeartbeats() {
  if (!heartbeat_thread_.joinable()) return;
  heartbeat_stop_->Notify();
  heartbeat_thread_.join();
}

void FakeWorker::SetStallAfter(int tokens) {
  absl::MutexLock lock(&mu_);
  stall_after_ = tokens;
}

void FakeWorker::SetHold(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_ = hold;
}

void FakeWorker::SetHealth(v1::HealthResponse::State state) {
  absl::MutexLock lock(&mu_);
  health_ = state;
}

void FakeWorker::SetFailure(int code, const std::string& message) {
  absl::MutexLock lock(&mu_);
  failure_code_ = code;
  failure_message_ = message;
}

void FakeWorker::SetKvPull(int code, int fail_next) {
  absl::MutexLock lock(&mu_);
  kv_pull_code_ = code;
  kv_pull_fail_next_ = fail_next;
}

void FakeWorker::SetCachedPromptTokens(int64_t tokens) {
  absl::MutexLock lock(&mu_);
  cached_prompt_tokens_ = tokens;
}

absl::Status FakeWorker::PullKv(const v1::ContextHandle& context) {
  int code = 0;
  bool fail = false;
  {
    absl::MutexLock lock(&mu_);
    code = kv_pull_code_;
    if (code != 0 && kv_pull_fail_next_ > 0) {
      --kv_pull_fail_next_;
      fail = true;
    }
  }
  if (code == 0) return absl::OkStatus();
  std::string why = "the test failed this pull";
  if (!fail) {
    v1::HealthResponse health;
    grpc::ClientContext call;
    SetDeadline(call, absl::Seconds(2));
    const grpc::Status status =
        v1::WorkerService::NewStub(security::CreateChannel(context.transfer_address()))
            ->Health(&call, v1::HealthRequest(), &health);
    if (status.ok()) return absl::OkStatus();
    why = status.error_message();
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      fmt::format("KV transfer from {} rank {} failed: {}", context.instance(),
                                  context.rank(), why));
}

void FakeWorker::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
}

std::vector<v1::GenerateRequest> FakeWorker::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::vector<uint64_t> FakeWorker::cancel_rpcs() const {
  absl::MutexLock lock(&mu_);
  return cancel_rpcs_;
}

int FakeWorker::streams_cancelled() const {
  absl::MutexLock lock(&mu_);
  return streams_cancelled_;
}

bool FakeWorker::AwaitStalled(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stalled_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

bool FakeWorker::AwaitHeld(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

int64_t FakeWorker::tokens_sent() const {
  absl::MutexLock lock(&mu_);
  return tokens_;
}

int FakeWorker::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

bool FakeWorker::WaitWhileHeld(grpc::ServerContext& context) {
  absl::MutexLock lock(&mu_);
  ++held_;
  const absl::Time give_up = absl::Now() + kMaxStall;
  auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hold_ || shutting_down_; };
  while (hold_ && !context.IsCancelled() && !shutting_down_ && absl::Now() < give_up) {
    mu_.AwaitWithTimeout(absl::Condition(&released), absl::Milliseconds(5));
  }
  --held_;
  return !hold_ && !context.IsCancelled() && !shutting_down_;
}

bool FakeWorker::AwaitCancelRpc(uint64_t id, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::find(cancel_rpcs_.begin(), cancel_rpcs_.end(), id) != cancel_rpcs_.end();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

bool FakeWorker::AwaitStreamsCancelled(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_cancelled_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void FakeWorker::WaitWhileStalled(grpc::ServerContext& context) {
  absl::MutexLock lock(&mu_);
  ++stalled_;
  const absl::Time give_up = absl::Now() + kMaxStall;
  // IsCancelled has no notification in the sync API: re-check it every few ms.
  while (!context.IsCancelled() && !shutting_down_ && absl::Now() < give_up) {
    mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), absl::Milliseconds(5));
  }
  --stalled_;
}

grpc::Status FakeWorker::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                  grpc::ServerWriter<v1::GenerateResponse>* writer) {
  int stall_after = -1;
  int failure_code = 0;
  std::string failure_message;
  int64_t cached = 0;
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    stall_after = stall_after_;
    failure_code = failure_code_;
    failure_message = failure_message_;
    cached = cached_prompt_tokens_;
  }
  const uint64_t id = request->request_id();
  const std::vector<int32_t> prompt(request->prompt_token_ids().begin(),
                                    request->prompt_token_ids().end());
  const v1::SamplingParams& sampling = request->sampling();
  // A continuation: the prompt ends with the first `earlier` generated tokens.
  const int earlier =
      std::clamp(sampling.num_generated_in_prompt(), 0, static_cast<int>(prompt.size()));
  const std::vector<int32_t> original(prompt.begin(), prompt.end() - earlier);
  auto token_at = [&](int p) { return TokenAt(original, earlier + p); };
  v1::GenerateResponse response;
  response.set_request_id(id);
  response.set_cached_prompt_tokens(cached);
  auto finish_with_error = [&](int code, const std::string& message) {
    response.set_finished(true);
    response.set_finish_reason(v1::FINISH_REASON_ERROR);
    response.set_error_code(code);
    response.set_error_message(message);
    writer->Write(response);
    return grpc::Status::OK;
  };
  if (failure_code != 0) return finish_with_error(failure_code, failure_message);
  if (request->model() != options_.model) {
    return finish_with_error(3, fmt::format("model {} is not served here", request->model()));
  }
  auto is_stop = [&](int32_t token) {
    return std::find(sampling.stop_token_ids().begin(), sampling.stop_token_ids().end(), token) !=
           sampling.stop_token_ids().end();
  };

  bool held = false;
  {
    absl::MutexLock lock(&mu_);
    held = hold_;
  }
  if (held) {
    if (!WaitWhileHeld(*context)) {
      absl::MutexLock lock(&mu_);
      ++streams_cancelled_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "held stream ended");
    }
    absl::MutexLock lock(&mu_);
    failure_code = failure_code_;
    failure_message = failure_message_;
  }
  if (failure_code != 0) return finish_with_error(failure_code, failure_message);

  int first_position = 0;
  if (request->type() == v1::REQUEST_TYPE_CONTEXT_ONLY) {
    const int32_t first = token_at(0);
    if (sampling.max_tokens() <= 1 || is_stop(first)) {
      response.add_token_ids(first);
      response.set_finished(true);
      response.set_finish_reason(is_stop(first) ? v1::FINISH_REASON_STOP
                                                : v1::FINISH_REASON_LENGTH);
      writer->Write(response);
      return grpc::Status::OK;
    }
    v1::ContextResult* result = response.mutable_context();
    v1::ContextHandle* handle = result->mutable_handle();
    handle->set_instance(options_.name);
    handle->set_rank(0);
    handle->set_transfer_address(address_);
    handle->set_context_request_id(id);
    handle->set_lease_expiry_unix_nanos(absl::ToUnixNanos(absl::Now() + absl::Seconds(30)));
    handle->set_num_prompt_tokens(static_cast<int32_t>(prompt.size()));
    result->set_first_token_id(first);
    if (sampling.logprobs() > 0) {
      result->mutable_first_logprobs()->set_token_id(first);
      result->mutable_first_logprobs()->set_logprob(-0.5f);
    }
    for (int p = 1; p <= 3; ++p) result->add_draft_token_ids(token_at(p));
    response.set_finished(true);
    response.set_finish_reason(v1::FINISH_REASON_HANDOFF);
    writer->Write(response);
    return grpc::Status::OK;
  }
  if (request->type() == v1::REQUEST_TYPE_GENERATION_ONLY) {
    const v1::ContextResult& context_result = request->context();
    if (context_result.handle().instance().empty() ||
        context_result.handle().context_request_id() != id) {
      return finish_with_error(9, "generation_only request without a valid context handle");
    }
    if (context_result.first_token_id() != token_at(0)) {
      return finish_with_error(9, "the first token does not match the context leg's");
    }
    if (const absl::Status pulled = PullKv(context_result.handle()); !pulled.ok()) {
      response.set_kv_pull_failed(true);
      return finish_with_error(static_cast<int>(pulled.code()), std::string(pulled.message()));
    }
    first_position = 1;
  }

  int produced = 0;
  for (int p = first_position; p < sampling.max_tokens(); ++p) {
    if (stall_after >= 0 && produced >= stall_after) {
      WaitWhileStalled(*context);
      absl::MutexLock lock(&mu_);
      ++streams_cancelled_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "stalled stream ended");
    }
    const int32_t token = token_at(p);
    v1::GenerateResponse step;
    step.set_request_id(id);
    step.set_cached_prompt_tokens(cached);
    step.add_token_ids(token);
    if (sampling.logprobs() > 0) {
      v1::TokenLogprobs* lp = step.add_logprobs();
      lp->set_token_id(token);
      lp->set_logprob(-0.5f);
      for (int k = 0; k < sampling.logprobs(); ++k) {
        v1::TopLogprob* top = lp->add_top();
        top->set_token_id(k == 0 ? token : 'A' + k);
        top->set_logprob(-0.5f - k);
      }
    }
    const bool last = p + 1 >= sampling.max_tokens() || (is_stop(token) && !sampling.ignore_eos());
    {
      absl::MutexLock lock(&mu_);
      step.set_step_id(++tokens_);
    }
    if (last) {
      step.set_finished(true);
      step.set_finish_reason(is_stop(token) ? v1::FINISH_REASON_STOP : v1::FINISH_REASON_LENGTH);
    }
    if (!writer->Write(step)) {
      absl::MutexLock lock(&mu_);
      ++streams_cancelled_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    ++produced;
    if (last) break;
  }
  return grpc::Status::OK;
}

grpc::Status FakeWorker::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                v1::CancelResponse* response) {
  absl::MutexLock lock(&mu_);
  cancel_rpcs_.push_back(request->request_id());
  response->set_found(true);
  return grpc::Status::OK;
}

grpc::Status FakeWorker::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                v1::HealthResponse* response) {
  absl::MutexLock lock(&mu_);
  response->set_state(health_);
  response->set_instance(options_.name);
  response->set_step_count(tokens_);
  response->set_last_step_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (health_ != v1::HealthResponse::STATE_SERVING) response->set_message("set by the test");
  return grpc::Status::OK;
}

grpc::Status FakeWorker::Stats(grpc::ServerContext*, const v1::StatsRequest*,
                               v1::StatsResponse* response) {
  absl::MutexLock lock(&mu_);
  response->set_instance(options_.name);
  response->set_steps(tokens_);
  response->set_vetoed_steps(1);
  response->set_padded_steps(2);
  response->set_active_requests(stalled_);
  for (int rank = 0; rank < options_.world_size; ++rank) {
    v1::PoolStats* pool = response->add_pools();
    pool->set_rank(rank);
    pool->set_pool("target");
    pool->set_free_blocks(100 + rank);
    pool->set_total_blocks(128);
  }
  return grpc::Status::OK;
}

grpc::Status FakeWorker::Drain(grpc::ServerContext*, const v1::DrainRequest*,
                               v1::DrainResponse* response) {
  absl::MutexLock lock(&mu_);
  health_ = v1::HealthResponse::STATE_DRAINING;
  response->set_active_requests(stalled_);
  return grpc::Status::OK;
}

}  // namespace lockstep::router::testing
