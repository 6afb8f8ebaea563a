#include "runtime/router/router_daemon.h"

#include <algorithm>
#include <utility>

#include "common/host_port.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/router.grpc.pb.h"
#include "runtime/config/message_limits.h"
#include "runtime/router/front_door_limits.h"
#include "runtime/router/routing/admission.h"
#include "runtime/router/tool_calls/parser_family.h"
#include "runtime/security/api_keys.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/security/secret.h"
#include "runtime/security/tls_session.h"
#include "runtime/security/token_checked_service.h"

namespace lockstep::router {
namespace {

// The HTTPS context of router.https_cert_file and https_key_file; null without them.
absl::StatusOr<std::shared_ptr<const security::TlsContext>> HttpsContext(
    const config::RouterConfig& rc) {
  if (rc.https_cert_file.empty()) return nullptr;
  const auto read = [](const char* field, const std::string& path) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> pem = security::ReadSecretFile(path);
    if (!pem.ok()) {
      return absl::Status(pem.status().code(),
                          fmt::format("router.{}: {}", field, std::string(pem.status().message())));
    }
    return *pem + "\n";
  };
  ASSIGN_OR_RETURN(const std::string cert, read("https_cert_file", rc.https_cert_file));
  ASSIGN_OR_RETURN(const std::string key, read("https_key_file", rc.https_key_file));
  absl::StatusOr<std::shared_ptr<const security::TlsContext>> context =
      security::TlsContext::ForServer(cert, key);
  if (!context.ok()) {
    return absl::InvalidArgumentError(fmt::format("router.https_cert_file {}, https_key_file {}: {}",
                                                  rc.https_cert_file, rc.https_key_file,
                                                  std::string(context.status().message())));
  }
  return context;
}

// `listen` with the port the server bound.
absl::StatusOr<std::string> Bound(const std::string& listen, int port) {
  ASSIGN_OR_RETURN(const HostPort address, ParseHostPort(listen));
  return address.WithPort(port).ToString();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterDaemon>> RouterDaemon::Start(config::DeploymentConfig config,
                                                                  Options options) {
  if (absl::Status status = config.Validate(); !status.ok()) return status;
  ModelText text;
  if (options.serving_tokenizer != nullptr) {
    text.tokenizer = options.serving_tokenizer;
  } else if (options.tokenizer.has_value()) {
    text.tokenizer = std::make_shared<const ServingTokenizer>(*options.tokenizer);
  } else {
    ASSIGN_OR_RETURN(text, LoadModelText(config.model.path));
  }
  // model.tool_call_parser / reasoning_parser over what the chat template says.
  if (config.model.tool_call_parser != "auto" || config.model.reasoning_parser != "auto") {
    const tok::ChatTemplate* chat = text.tokenizer->chat_template();
    absl::StatusOr<tool_calls::ParserFamily> family = tool_calls::ParserFamilyFromNames(
        config.model.tool_call_parser, config.model.reasoning_parser,
        chat != nullptr ? chat->source() : "");
    if (!family.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("model.tool_call_parser / reasoning_parser: {}",
                      std::string(family.status().message())));
    }
    text.tokenizer = text.tokenizer->WithParserFamily(*family);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const security::TlsContext> https, HttpsContext(config.router));
  absl::StatusOr<security::ApiKeys> api_keys =
      security::ApiKeys::Load(config.router.api_key, config.router.api_keys_file);
  if (!api_keys.ok()) {
    return absl::Status(api_keys.status().code(),
                        fmt::format("router.api_keys_file: {}", std::string(api_keys.status().message())));
  }
  auto daemon = std::unique_ptr<RouterDaemon>(
      new RouterDaemon(std::move(config), std::move(options), std::move(text), std::move(https),
                       *std::move(api_keys)));
  if (absl::Status status = daemon->StartServing(); !status.ok()) return status;
  return daemon;
}

RouterDaemon::RouterDaemon(config::DeploymentConfig config, Options options, ModelText text,
                           std::shared_ptr<const security::TlsContext> https,
                           security::ApiKeys api_keys)
    : config_(std::move(config)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : *SystemClock::Get()),
      tokenizer_(std::move(text.tokenizer)),
      kv_routing_({.max_keys = static_cast<size_t>(config_.router.kv_index_max_keys)}) {
  const config::RouterConfig& rc = config_.router;
  metrics_.set_kv_routing(&kv_routing_);
  registry_ = std::make_unique<InstanceRegistry>(
      InstanceRegistry::Options{
          .model = config_.model.name,
          .policy = rc.policy,
          .heartbeat_timeout = absl::Milliseconds(rc.heartbeat_timeout_ms),
          .kv = &kv_routing_,
          .kv_weights = {.prefix = rc.kv_prefix_weight,
                         .load = rc.kv_load_weight,
                         .free = rc.kv_free_weight,
                         .host_hit = rc.kv_host_hit_weight,
                         .disk_hit = rc.kv_disk_hit_weight},
          .max_queued_requests = rc.max_queued_requests},
      config_.instances, clock_);
  runner_ = std::make_unique<RequestRunner>(
      RequestRunner::Options{.request_timeout = absl::Seconds(rc.request_timeout_s),
                             .eos_token_ids = std::move(text.eos_token_ids),
                             .migration_limit = static_cast<int>(rc.migration_limit),
                             .max_queued_requests = rc.max_queued_requests,
                             .progress = &progress_},
      *registry_, stubs_, flows_, metrics_, clock_);
  // A poll may take longer than the interval on a loaded machine; a missed answer
  // should mean a stalled or dead leader, not a busy one.
  monitor_ = std::make_unique<HealthMonitor>(
      *registry_, stubs_, flows_,
      std::max(absl::Milliseconds(rc.health_check_interval_ms), absl::Seconds(1)), &progress_);
  const RequestLimits limits{.model = config_.model.name,
                             .max_prompt_tokens = rc.max_prompt_tokens,
                             .vocab_size = tokenizer_->vocab_size()};
  // One limit for HTTP and gRPC requests together (docs/security.md §5), and the
  // connection cap: set, or sized from the instances' capacity (front_door_limits.h).
  const FrontDoorLimits front_door = FrontDoorLimitsOf(config_);
  const auto admission = std::make_shared<Admission>(front_door.max_concurrent_requests,
                                                     front_door.concurrency_limit_name);
  grpc_frontend_ = std::make_unique<GrpcFrontend>(
      GrpcFrontend::Options{.limits = limits,
                            .heartbeat_interval = absl::Milliseconds(rc.heartbeat_interval_ms),
                            .heartbeat_timeout = absl::Milliseconds(rc.heartbeat_timeout_ms),
                            .api_keys = api_keys,
                            .admission = admission,
                            .generate_calls = std::make_shared<Admission>(
                                front_door.max_grpc_generate_calls,
                                front_door.grpc_generate_limit_name),
                            .kv_routing = &kv_routing_,
                            .write_timeout = absl::Milliseconds(rc.http_write_timeout_ms)},
      *runner_, *registry_, metrics_, *tokenizer_, clock_);
  http_frontend_ = std::make_unique<HttpFrontend>(
      HttpFrontend::Options{.api_keys = std::move(api_keys),
                            .admission = admission,
                            .server = {.io_threads = static_cast<int>(rc.http_threads),
                                       .max_connections = front_door.max_connections,
                                       .max_body_bytes = rc.max_request_body_bytes,
                                       .max_header_bytes = rc.max_header_bytes,
                                       .max_header_count = rc.max_header_count,
                                       .first_request_timeout =
                                           absl::Milliseconds(rc.http_first_request_timeout_ms),
                                       .idle_timeout = absl::Milliseconds(rc.http_idle_timeout_ms),
                                       .read_timeout = absl::Milliseconds(rc.http_read_timeout_ms),
                                       .write_timeout =
                                           absl::Milliseconds(rc.http_write_timeout_ms),
                                       .retry_after_seconds = kAdmissionRetryAfterSeconds},
                            .tls = std::move(https),
                            .api_key_for_health_and_metrics = rc.api_key_for_health_and_metrics,
                            .keepalive_interval = options_.keepalive_interval,
                            .limits = limits,
                            .sampling_defaults = text.sampling_defaults,
                            .start_thread = options_.start_thread},
      *runner_, *registry_, metrics_, *tokenizer_, clock_);
}

absl::Status RouterDaemon::StartServing() {
  const config::RouterConfig& rc = config_.router;
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  // Bounded threads: a call that finds none free is refused, never queued (docs/security.md §5).
  grpc::ResourceQuota quota("lockstep-router-grpc");
  quota.SetMaxThreads(static_cast<int>(rc.grpc_max_threads));
  builder.SetResourceQuota(quota);
  // A RouterService.Generate within the HTTP API's limits (a prompt of text up to the
  // body limit, or of max_prompt_tokens ids) is never refused for its size.
  builder.SetMaxReceiveMessageSize(config::GrpcMessageLimit(
      rc.max_request_body_bytes + config::MaxGenerateRequestBytes(rc.max_prompt_tokens)));
  // Every method needs the cluster token but RouterService.Generate, which is for
  // clients (their API key).
  builder.AddListeningPort(rc.grpc_listen, security::ServerTransportCredentials(), &grpc_port);
  checked_services_.push_back(security::RequireClusterToken<v1::RouterService>(
      grpc_frontend_.get(), security::ProcessClusterSecurity(),
      {"/lockstep.v1.RouterService/Generate"}));
  checked_services_.push_back(security::RequireClusterToken<v1::RendezvousService>(&rendezvous_));
  for (const auto& service : checked_services_) builder.RegisterService(service.get());
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || grpc_port <= 0) {
    return absl::UnavailableError(fmt::format("cannot listen for gRPC on {}", rc.grpc_listen));
  }
  ASSIGN_OR_RETURN(grpc_address_, Bound(rc.grpc_listen, grpc_port));

  absl::StatusOr<int> http_port = http_frontend_->Start(rc.http_listen);
  if (!http_port.ok()) return http_port.status();
  ASSIGN_OR_RETURN(http_address_, Bound(rc.http_listen, *http_port));

  if (!options_.housekeeping_on_caller) {
    housekeeping_thread_ = std::thread([this] {
      RunHousekeeping([this](absl::Duration d) { return stop_.WaitForNotificationWithTimeout(d); });
    });
  }
  const FrontDoorLimits front_door = FrontDoorLimitsOf(config_);
  LOCKSTEP_LOG_INFO("router",
                    "front door: at most {} requests in flight ({}), {} open HTTP connections{}; "
                    "the instances hold {} at once (docs/security.md §5)",
                    front_door.max_concurrent_requests, front_door.concurrency_limit_name,
                    front_door.max_connections,
                    rc.max_connections > 0 ? " (router.max_connections)" : "", front_door.capacity);
  LOCKSTEP_LOG_INFO("router", "serving model {} ({} instances configured): {} {} grpc {}{}",
                    config_.model.name, config_.instances.size(),
                    rc.https_cert_file.empty() ? "http" : "https", http_address_, grpc_address_,
                    security::ProcessClusterSecurity().tls() ? " (TLS)" : "");
  return absl::OkStatus();
}

void RouterDaemon::RunHousekeeping(const std::function<bool(absl::Duration)>& stop_within) {
  const absl::Duration check_interval =
      absl::Milliseconds(config_.router.health_check_interval_ms);
  absl::Time next_check = absl::Now() + check_interval;
  while (!stop_.HasBeenNotified()) {
    const absl::Duration until_check = std::max(absl::ZeroDuration(), next_check - absl::Now());
    if (stop_within(std::min(options_.sweep_interval, until_check))) return;
    flows_.CancelDisconnected();
    if (absl::Now() >= next_check) {
      monitor_->CheckOnce();
      next_check = absl::Now() + check_interval;
    }
  }
}

RouterDaemon::~RouterDaemon() { Shutdown(); }

void RouterDaemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // UNAVAILABLE (HTTP 503): the server went away, not the client (CANCELLED is 499).
  flows_.Close(absl::UnavailableError("the router is shutting down; retry on another router"));
  if (http_frontend_ != nullptr) http_frontend_->Stop();
  rendezvous_.Shutdown();  // ends pending waits, so no handler blocks the server's shutdown
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  stop_.Notify();
  if (housekeeping_thread_.joinable()) housekeeping_thread_.join();
  LOCKSTEP_LOG_INFO("router", "stopped");
}

}  // namespace lockstep::router
