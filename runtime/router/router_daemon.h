// The router process's core: RouterService (gRPC) and the OpenAI-compatible HTTP API
// in front of the instance registry, the rendezvous service on the same gRPC port (the
// ranks of every instance bootstrap their collectives there), the request runner, and the
// housekeeping loop: the sweep (every `sweep_interval`: cancels requests whose client
// left) and the instance checks (every `router.health_check_interval_ms`: heartbeats,
// Health and Stats polls), on one thread of the daemon's own or, with
// `housekeeping_on_caller`, on the owner's thread in RunHousekeeping (the router
// process's main thread, which would otherwise only wait for a signal). A sweep waits
// while a check's polls run (each bounded by the poll timeout).
//
//   ASSIGN_OR_RETURN(auto router, RouterDaemon::Start(config, {}));
//   printf("%s\n", router->http_address().c_str());
//   ...
//   router->Shutdown();   // also done by the destructor
//
// Shutdown cancels every request in flight (their clients get UNAVAILABLE: HTTP 503, or
// a stream's error event; each is cancelled at its worker), stops both servers, then
// the threads. Thread safety: the accessors are thread-safe; Start and
// Shutdown are called by the owner.
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTER_DAEMON_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTER_DAEMON_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/config/deployment_config.h"
#include "runtime/router/core/flow_tracker.h"
#include "runtime/router/core/health_monitor.h"
#include "runtime/router/core/instance_progress.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/core/worker_stubs.h"
#include "runtime/router/grpc_frontend.h"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/http/http_frontend.h"
#include "runtime/router/routing/kv_routing.h"
#include "runtime/router/text/model_text.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "runtime/security/api_keys.h"
#include "runtime/security/tls_session.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::router {

class RouterDaemon {
 public:
  struct Options {
    Clock* clock = nullptr;  // null: SystemClock::Get()
    // null: loaded from the model directory (config.model.path, text/model_text.h), with
    // the end-of-generation ids of its generation_config.json.
    std::optional<tok::ByteTokenizer> tokenizer;
    // Takes precedence over `tokenizer` when set.
    std::shared_ptr<const ServingTokenizer> serving_tokenizer;
    absl::Duration sweep_interval = absl::Milliseconds(100);
    // No housekeeping thread: the owner runs RunHousekeeping.
    bool housekeeping_on_caller = false;
    absl::Duration keepalive_interval = absl::Seconds(1);
    // Starts the threads of an HTTP request's choices beyond the first (tests inject
    // failures; http/choice_threads.h).
    ThreadStarter start_thread = StartThread;
  };

  // Validates `config`, reads router.api_keys_file (an error names the field), binds both
  // ports and starts serving.
  static absl::StatusOr<std::unique_ptr<RouterDaemon>> Start(config::DeploymentConfig config,
                                                             Options options);
  ~RouterDaemon();

  // With `housekeeping_on_caller`: sweeps and checks on the calling thread until
  // `stop_within(d)` (a wait of at most `d`) returns true or Shutdown begins.
  void RunHousekeeping(const std::function<bool(absl::Duration)>& stop_within);

  void Shutdown();

  const std::string& http_address() const { return http_address_; }
  const std::string& grpc_address() const { return grpc_address_; }
  InstanceRegistry& registry() { return *registry_; }
  RouterMetrics& metrics() { return metrics_; }
  KvRouting& kv_routing() { return kv_routing_; }
  FlowTracker& flows() { return flows_; }

 private:
  RouterDaemon(config::DeploymentConfig config, Options options, ModelText text,
               std::shared_ptr<const security::TlsContext> https, security::ApiKeys api_keys);
  absl::Status StartServing();

  const config::DeploymentConfig config_;
  Options options_;
  Clock& clock_;
  const std::shared_ptr<const ServingTokenizer> tokenizer_;
  KvRouting kv_routing_;
  RouterMetrics metrics_;
  FlowTracker flows_;
  WorkerStubs stubs_;
  InstanceProgress progress_;  // the runner counts, the monitor reads
  std::unique_ptr<InstanceRegistry> registry_;
  std::unique_ptr<RequestRunner> runner_;
  std::unique_ptr<HealthMonitor> monitor_;
  std::unique_ptr<GrpcFrontend> grpc_frontend_;
  std::unique_ptr<HttpFrontend> http_frontend_;
  comm::RendezvousServiceImpl rendezvous_;
  // What the gRPC server registers: the services above behind the cluster-token check.
  std::vector<std::unique_ptr<grpc::Service>> checked_services_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::string http_address_;
  std::string grpc_address_;
  absl::Notification stop_;
  std::thread housekeeping_thread_;  // unless housekeeping_on_caller
  bool shut_down_ = false;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTER_DAEMON_H_
