#include "runtime/worker/worker.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/config/message_limits.h"
#include "runtime/config/role_wire.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/device/cuda_support.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/token_checked_service.h"
#include "runtime/worker/executor_settings.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {
namespace {

// Vocabulary of the fake engine: room for the byte-level tokenizer of the tiny models.
constexpr int kFakeVocab = 320;

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Start(WorkerOptions options) {
  auto worker = absl::WrapUnique(new Worker(std::move(options)));
  RETURN_IF_ERROR(worker->Init());
  return worker;
}

Worker::~Worker() {
  stopping_.Notify();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (kv_event_thread_.joinable()) kv_event_thread_.join();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  executor_.reset();
  engine_.reset();
}

absl::Status Worker::Init() {
  const config::DeploymentConfig& d = options_.deployment;
  instance_ = d.FindInstance(options_.instance);
  if (instance_ == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("instance '", options_.instance, "' is not in the deployment config"));
  }
  if (instance_->world_size != options_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("--world-size ", options_.world_size,
                                                   " but instance ", instance_->name,
                                                   " has world_size ", instance_->world_size));
  }
  if (options_.rank < 0 || options_.rank >= options_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank must be in [0, ", options_.world_size, "), got ", options_.rank));
  }
  if (instance_->engine == config::EngineKind::kCuda) {
    // Before anything is allocated or any peer is waited for.
    const absl::Status cuda = engine::CudaEngineSupport();
    if (!cuda.ok()) {
      return absl::Status(cuda.code(),
                          absl::StrCat("instance ", instance_->name, ": ", cuda.message()));
    }
  }
  const spec::SpeculativeConfig speculative = config::EffectiveSpeculative(*instance_);
  const int tpb = static_cast<int>(instance_->kv.tokens_per_block);
  const bool cuda = instance_->engine == config::EngineKind::kCuda;

  BootstrapOptions boot;
  boot.rendezvous_address = options_.rendezvous_address;
  boot.instance = instance_->name;
  boot.rank = options_.rank;
  boot.world_size = options_.world_size;
  boot.hostname = options_.gloo_host;
  boot.timeout = options_.bootstrap_timeout;
  boot.vote_transport = instance_->comm.vote_transport;
  boot.engine_transport = instance_->comm.engine_transport;

  // Layouts first: a bad model fails fast, before waiting for peers. The CUDA engine's
  // come from its models on the GPU, loaded after the bootstrap (its NCCL group needs
  // the epoch) and before the pools (sized from what the weights leave free).
  kv::BlockLayout target_layout{1, 1, 1, tpb};
  kv::BlockLayout draft_layout{1, 1, 1, tpb};
  if (instance_->engine == config::EngineKind::kCpu) {
    ASSIGN_OR_RETURN(target_layout, engine::ModelBlockLayout(d.model.path, tpb));
    if (speculative.needs_draft_kv()) {
      ASSIGN_OR_RETURN(draft_layout, engine::DraftBlockLayout(speculative, d.model.path,
                                                              d.model.draft_path, tpb));
    }
  } else if (cuda) {
    RETURN_IF_ERROR(StartDeviceEngine(boot, speculative));
    target_layout = device_->target_layout();
    if (std::optional<kv::BlockLayout> draft = device_->draft_layout()) draft_layout = *draft;
  }
  ASSIGN_OR_RETURN(exec::ExecutorConfig config,
                   MakeExecutorConfig(d, *instance_, options_.rank, target_layout, draft_layout));
  if (cuda) RETURN_IF_ERROR(SizeDevicePools(config));
  ASSIGN_OR_RETURN(std::unique_ptr<kv::KvManager> kv,
                   kv::KvManager::Create(config.kv, cuda ? device_->allocator()
                                                         : options_.kv_allocator));
  if (!cuda) {
    ASSIGN_OR_RETURN(groups_, BootstrapInstance(boot));
  }

  if (instance_->engine == config::EngineKind::kCpu) {
    if (kv->memory_kind() != kv::MemoryKind::kHost) {
      return absl::FailedPreconditionError(
          absl::StrCat("the CPU engine needs KV pools in host memory, they are in ",
                       kv::MemoryKindName(kv->memory_kind()), " memory"));
    }
    // Host f32 slabs (CheckPool in cpu_engine.cc holds the layouts to f32).
    engine::CpuEngineOptions e;
    e.model_dir = d.model.path;
    e.speculative = speculative;
    if (speculative.needs_draft_kv()) e.draft_model_dir = d.model.draft_path;
    e.target_storage = reinterpret_cast<float*>(kv->Storage(kv::PoolKind::kTarget));
    e.target_layout = target_layout;
    e.target_num_blocks = kv->num_blocks(kv::PoolKind::kTarget);
    if (kv->has_draft()) {
      e.draft_storage = reinterpret_cast<float*>(kv->Storage(kv::PoolKind::kDraft));
      e.draft_layout = draft_layout;
      e.draft_num_blocks = kv->num_blocks(kv::PoolKind::kDraft);
    }
    e.communicator = groups_.engine.get();
    e.rank = options_.rank;
    e.world_size = options_.world_size;
    e.collective_timeout = config.collective_timeout;
    e.num_threads = static_cast<int>(instance_->executor.blas_threads);
    e.expert_placement = instance_->eplb.expert_placement;
    e.expert_load_window = static_cast<int>(instance_->eplb.load_window);
    e.expert_load_dump = instance_->eplb.load_dump;
    e.expert_load_board = &expert_loads_;
    e.expert_rebalance_windows = static_cast<int>(instance_->eplb.rebalance_windows);
    e.expert_redundant_slots = static_cast<int>(instance_->eplb.redundant_slots);
    ASSIGN_OR_RETURN(engine_, engine::CreateCpuEngine(e));
  } else if (cuda) {
    ASSIGN_OR_RETURN(engine_, FinishDeviceEngine(*kv));
  } else {
    engine::FakeEngineOptions e;
    e.vocab_size = kFakeVocab;
    e.tokens_per_block = tpb;
    e.target_num_blocks = kv->num_blocks(kv::PoolKind::kTarget);
    e.draft_num_blocks = kv->has_draft() ? kv->num_blocks(kv::PoolKind::kDraft) : 0;
    e.spec_method = speculative.method;
    e.ngram_max = speculative.ngram_max;
    engine_ = std::make_unique<engine::FakeEngine>(e);
  }
  if (instance_->role != config::InstanceRole::kAggregated) {
    ASSIGN_OR_RETURN(transceiver_, CreateTransceiver(*kv, config));
    config.transfer_address = transceiver_address_;
  }

  exec::Executor::Deps deps;
  deps.comm = groups_.executor.get();
  deps.engine = engine_.get();
  deps.kv = std::move(kv);
  deps.transceiver = transceiver_.get();
  deps.clock = SystemClock::Get();
  deps.sink = options_.rank == 0 ? &streams_ : nullptr;
  if (options_.rank == 0 && config.kv_events && options_.register_with_router) {
    kv_events_ = std::make_unique<KvEventPublisher>(KvEventPublisher::Options{
        .instance = instance_->name,
        .world_size = options_.world_size,
        .incarnation = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())),
        .hash_salt = config.kv.target.reuse_salt,
        .tokens_per_block = config.kv.target.layout.tokens_per_block});
    deps.kv_event_sink = kv_events_.get();
  }
  ASSIGN_OR_RETURN(executor_, exec::Executor::Create(config, std::move(deps)));
  last_progress_nanos_.store(absl::ToUnixNanos(absl::Now()));
  if (options_.rank == 0) {
    RETURN_IF_ERROR(StartService());
    if (options_.register_with_router) heartbeat_ = std::thread([this] { HeartbeatLoop(); });
    if (kv_events_ != nullptr) kv_event_thread_ = std::thread([this] { KvEventLoop(); });
  }
  LOCKSTEP_LOG_INFO("worker", "instance {} rank {} of {} ready{}", instance_->name, options_.rank,
                    options_.world_size,
                    service_address_.empty() ? "" : absl::StrCat(" at ", service_address_));
  return absl::OkStatus();
}

absl::Status Worker::StartService() {
  WorkerServiceOptions o;
  o.instance = instance_->name;
  o.model = options_.deployment.model.name;
  o.request_timeout = absl::Seconds(options_.deployment.router.request_timeout_s);
  o.clock = SystemClock::Get();
  o.executor = executor_.get();
  o.target_layout = executor_->kv().layout(kv::PoolKind::kTarget);  // fixed from its start
  o.streams = &streams_;
  o.health = [this] { return Health(); };
  if (instance_->engine == config::EngineKind::kCpu && instance_->eplb.load_window > 0) {
    o.expert_loads = &expert_loads_;
  }
  service_ = std::make_unique<WorkerServiceImpl>(std::move(o));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen_address, security::ServerTransportCredentials(), &port);
  // Every request the router may send fits: a prompt of up to max_prompt_tokens ids, or
  // a migrated request's prompt and output, at most the model's positions.
  builder.SetMaxReceiveMessageSize(config::GrpcMessageLimit(config::MaxGenerateRequestBytes(
      std::max(options_.deployment.router.max_prompt_tokens, engine_->info().max_position))));
  checked_service_ = security::RequireClusterToken<v1::WorkerService>(service_.get());
  builder.RegisterService(checked_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen_address, " for WorkerService"));
  }
  ASSIGN_OR_RETURN(const HostPort listen, ParseHostPort(options_.listen_address));
  service_address_ = listen.WithPort(port).ToString();
  return absl::OkStatus();
}

HealthView Worker::Health() const {
  HealthView view;
  if (failed_.load()) {
    view.state = v1::HealthResponse::STATE_NOT_PROGRESSING;
    view.message = "this instance lost a rank";
    return view;
  }
  const absl::Duration since = absl::Now() - absl::FromUnixNanos(last_progress_nanos_.load());
  const absl::Duration limit = absl::Milliseconds(instance_->executor.step_timeout_ms);
  if (since > limit) {
    view.state = v1::HealthResponse::STATE_NOT_PROGRESSING;
    view.message = absl::StrCat("no step completed for ", absl::FormatDuration(since));
  } else if (executor_->Snapshot().draining || stop_requested_.load()) {
    view.state = v1::HealthResponse::STATE_DRAINING;
  }
  return view;
}

absl::Status Worker::Run() {
  const bool leader = options_.rank == 0;
  bool drain_sent = false;
  absl::Time stop_deadline = absl::InfiniteFuture();
  while (true) {
    if (stop_requested_.load() && !drain_sent) {
      drain_sent = true;
      if (leader) executor_->inbox().Drain();
      // A non-leader waits for the leader's drain; bounded in case the leader is gone.
      stop_deadline = absl::Now() + executor_->config().drain_timeout + absl::Seconds(30);
    }
    if (absl::Now() > stop_deadline) {
      return absl::DeadlineExceededError("the instance did not drain in time after SIGTERM");
    }
    if (leader && executor_->idle() && !stop_requested_.load()) {
      // Nothing forwarded: wait for input, briefly when transfers or claims are pending
      // (their completion is polled, not signalled).
      executor_->inbox().WaitForWork(absl::Milliseconds(executor_->busy() ? 2 : 20));
    }
    const absl::Status step = executor_->Step();
    last_progress_nanos_.store(absl::ToUnixNanos(absl::Now()));
    if (!step.ok()) {
      failed_.store(true);
      const absl::Status why = absl::UnavailableError(absl::StrCat(
          "instance ", instance_->name, " rank ", options_.rank, " stopped: ", step.message()));
      LOCKSTEP_LOG_ERROR("worker", "{}", why.ToString());
      streams_.FailAll(why);
      return why;
    }
    if (executor_->drained()) {
      LOCKSTEP_LOG_INFO("worker", "drained after {} steps", executor_->Snapshot().step);
      return absl::OkStatus();
    }
  }
}

void Worker::HeartbeatLoop() {
  auto channel =
      security::CreateChannel(options_.rendezvous_address);
  auto stub = v1::RouterService::NewStub(channel);
  absl::Duration interval = absl::Milliseconds(options_.deployment.router.heartbeat_interval_ms);
  bool registered = false;
  while (
      !stopping_.WaitForNotificationWithTimeout(registered ? interval : absl::Milliseconds(100))) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    if (!registered) {
      v1::RegisterRequest request;
      request.set_instance(instance_->name);
      request.set_role(config::RoleToWire(instance_->role));
      request.set_world_size(static_cast<int32_t>(instance_->world_size));
      request.set_leader_address(service_address_);
      request.set_model(options_.deployment.model.name);
      v1::RegisterResponse response;
      const grpc::Status s = stub->Register(&context, request, &response);
      if (!s.ok()) {
        LOCKSTEP_LOG_WARN("worker", "register with the router failed: {}", s.error_message());
        continue;
      }
      registered = true;
      if (response.heartbeat_interval_ms() > 0) {
        interval = absl::Milliseconds(response.heartbeat_interval_ms());
      }
      continue;
    }
    const exec::ExecutorSnapshot snap = executor_->Snapshot();
    v1::HeartbeatRequest request;
    request.set_instance(instance_->name);
    request.mutable_load()->set_active_requests(snap.active_requests);
    request.mutable_load()->set_queued_requests(snap.queued_requests);
    int64_t free = 0;
    for (int64_t f : snap.free_target_blocks) free += f;
    request.mutable_load()->set_free_blocks(free);
    v1::HeartbeatResponse response;
    const grpc::Status s = stub->Heartbeat(&context, request, &response);
    if (s.ok() && response.reregister()) registered = false;
  }
}

void Worker::KvEventLoop() {
  auto stub = v1::RouterService::NewStub(security::CreateChannel(options_.rendezvous_address));
  const absl::Duration interval =
      absl::Milliseconds(options_.deployment.router.kv_event_interval_ms);
  bool failing = false;
  while (!stopping_.WaitForNotificationWithTimeout(interval)) {
    std::optional<v1::ReportKvEventsRequest> report = kv_events_->TakeReport();
    if (!report.has_value()) continue;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::ReportKvEventsResponse response;
    const grpc::Status s = stub->ReportKvEvents(&context, *report, &response);
    if (s.ok()) {
      kv_events_->OnResponse(response);
      if (failing) LOCKSTEP_LOG_INFO("worker", "KV events reach the router again");
    } else {
      kv_events_->OnSendFailed(*report);  // its ranks resend everything as snapshots
      if (!failing) {
        LOCKSTEP_LOG_WARN("worker", "sending KV events to the router failed: {}",
                          s.error_message());
      }
    }
    failing = !s.ok();
  }
}

}  // namespace lockstep::worker
