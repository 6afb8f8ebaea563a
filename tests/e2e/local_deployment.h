// LocalDeployment: a real multi-process deployment for end-to-end tests — the router
// and every rank of every instance as child processes of the test (the `lockstep`
// binary from the test's runfiles), on loopback with free ports, each logging to a file
// under the test's temporary directory. Built from the same launch plan as
// `lockstep launch`. Every wait is bounded; the destructor stops every child.
//
// Thread safety: the process control methods are for the test's main thread; the
// client methods (Complete, Generate, Health) may be called from any thread.
#ifndef LOCKSTEP_TESTS_E2E_LOCAL_DEPLOYMENT_H_
#define LOCKSTEP_TESTS_E2E_LOCAL_DEPLOYMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/launch_plan.h"
#include "runtime/launcher/process_supervisor.h"

namespace lockstep::e2e {

// Writes a tiny-moe model (and its draft) into `dir` once per test binary.
absl::Status EnsureTinyMoe(const std::string& dir);

// The `lockstep` binary in the test's runfiles.
std::string LockstepBinary();

// What a gRPC Generate call returned.
struct GrpcResult {
  std::vector<int32_t> tokens;
  std::string text;
  int finish_reason = 0;   // v1::FinishReason
  int error_code = 0;      // canonical code; 0 when OK
  std::string error_message;
  int responses = 0;       // stream messages received
};

class LocalDeployment {
 public:
  // `yaml` is a deployment file; it is written next to the logs.
  static absl::StatusOr<std::unique_ptr<LocalDeployment>> Start(const std::string& yaml,
                                                                const std::string& run_dir,
                                                                absl::Duration ready_timeout);
  ~LocalDeployment();

  const std::string& http_address() const { return plan_.router_http; }
  const std::string& grpc_address() const { return plan_.router_grpc; }
  const config::DeploymentConfig& config() const { return config_; }

  // POST `body` to `path` on the router's HTTP API; returns (status, body).
  std::pair<int, std::string> Post(const std::string& path, const std::string& body,
                                   absl::Duration timeout = absl::Seconds(120)) const;
  std::pair<int, std::string> Get(const std::string& path) const;
  // RouterService.Generate with a token prompt; collects the whole stream.
  GrpcResult Generate(const std::vector<int32_t>& prompt, int max_tokens, uint64_t seed,
                      absl::Duration timeout = absl::Seconds(120)) const;
  // The router's view of `instance` ("healthy", "unhealthy", ...; "" when unknown).
  std::string InstanceState(const std::string& instance) const;
  // Waits until every configured instance is healthy.
  absl::Status WaitHealthy(absl::Duration timeout);

  // Process control (test thread).
  pid_t PidOf(const std::string& name) const { return supervisor_.PidOf(name); }
  // Starts again every rank of `instance` that is not running.
  absl::Status RestartInstance(const std::string& instance);
  // Children that exited since the last call (reaped).
  std::vector<launcher::ChildExit> Reap();
  std::string LogOf(const std::string& name) const;

 private:
  LocalDeployment() = default;

  config::DeploymentConfig config_;
  launcher::LaunchPlan plan_;
  launcher::ProcessSupervisor supervisor_;
};

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_LOCAL_DEPLOYMENT_H_
