// LocalDeployment: a whole deployment as child processes of the caller — the router
// and every rank of every instance (launch_plan.h), on loopback with ports the
// processes bind themselves (port 0) and report, each logging to a file in the run
// directory — plus small clients for its HTTP and gRPC
// APIs. Used by end-to-end tests, `lockstep bench` and the demo. Every wait is
// bounded; the destructor stops every child (SIGTERM, then SIGKILL).
//
// Thread safety: the process control methods are for the thread that started the
// deployment; the client methods (Post, Get, Generate, InstanceState, LoadOf) may be
// called from any thread.
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_LOCAL_DEPLOYMENT_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_LOCAL_DEPLOYMENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "proto/router.pb.h"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/launch_plan.h"
#include "runtime/launcher/process_supervisor.h"

// Named only by the private HttpClient(); httplib.h, the largest header this one would
// pull into every end-to-end test, is included by local_deployment.cc.
namespace httplib {
class Client;
}  // namespace httplib

namespace lockstep::launcher {

// What a gRPC Generate call returned.
struct GrpcResult {
  std::vector<int32_t> tokens;
  std::string text;
  int finish_reason = 0;  // v1::FinishReason
  int error_code = 0;     // canonical code; 0 when OK
  std::string error_message;
  int responses = 0;  // stream messages received
  // Usage, from the final response.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Speculative decoding: the request's drafts (from the final response).
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
};

class LocalDeployment {
 public:
  // Starts the deployment described by the YAML text `yaml` (written to
  // `run_dir`/deployment.yaml, so relative paths in it resolve against `run_dir`),
  // using the `lockstep` executable at `lockstep_binary`, and waits until every
  // instance is healthy.
  static absl::StatusOr<std::unique_ptr<LocalDeployment>> Start(const std::string& yaml,
                                                                const std::string& run_dir,
                                                                const std::string& lockstep_binary,
                                                                absl::Duration ready_timeout);
  // The same for a deployment file on disk.
  static absl::StatusOr<std::unique_ptr<LocalDeployment>> StartFile(
      const std::string& config_path, const std::string& run_dir,
      const std::string& lockstep_binary, absl::Duration ready_timeout);
  ~LocalDeployment();

  const std::string& http_address() const { return plan_.router_http; }
  // "http://host:port", or "https://host:port" when router.https_cert_file is set.
  std::string http_url() const;
  const std::string& grpc_address() const { return plan_.router_grpc; }
  const config::DeploymentConfig& config() const { return config_; }
  const LaunchPlan& plan() const { return plan_; }

  // POST `body` to `path` on the router's HTTP API (HTTPS checked against
  // router.https_ca_file); returns (status, body).
  std::pair<int, std::string> Post(const std::string& path, const std::string& body,
                                   absl::Duration timeout = absl::Seconds(120)) const;
  std::pair<int, std::string> Get(const std::string& path) const;
  // RouterService.Generate with a token prompt; collects the whole stream.
  GrpcResult Generate(const std::vector<int32_t>& prompt, int max_tokens, uint64_t seed,
                      absl::Duration timeout = absl::Seconds(120)) const;
  // RouterService.Generate of `request` (the deployment's model when it names none);
  // `on_response`, when set, sees each stream message as it arrives.
  GrpcResult Generate(
      v1::RouterGenerateRequest request, absl::Duration timeout,
      const std::function<void(const v1::RouterGenerateResponse&)>& on_response = nullptr) const;
  // The router's view of `instance` ("healthy", "unhealthy", ...; "" when unknown).
  std::string InstanceState(const std::string& instance) const;
  // Waits until every configured instance is healthy.
  absl::Status WaitHealthy(absl::Duration timeout);

  // Process control (test thread).
  pid_t PidOf(const std::string& name) const { return supervisor_.PidOf(name); }
  // Starts again every rank of `instance` that is not running.
  absl::Status RestartInstance(const std::string& instance);
  // Children that exited since the last call (reaped).
  std::vector<ChildExit> Reap();
  // Polls `done` until it is true or `timeout` passes; between polls it waits on the
  // children (so it also reaps those that exit). Returns the last value of `done`.
  bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);
  // Requests the router last heard `instance` holds (active + queued), -1 if unknown.
  int64_t LoadOf(const std::string& instance) const;
  // The log of process `name` ("router", "INSTANCE/rankR"); "" when unknown.
  std::string LogOf(const std::string& name) const;

 private:
  LocalDeployment() = default;
  absl::StatusOr<std::unique_ptr<httplib::Client>> HttpClient() const;

  config::DeploymentConfig config_;
  absl::Status Launch(const std::string& config_path, const std::string& run_dir,
                      const std::string& lockstep_binary, absl::Duration ready_timeout);

  LaunchPlan plan_;
  ProcessSupervisor supervisor_;
};

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_LOCAL_DEPLOYMENT_H_
