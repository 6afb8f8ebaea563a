#include "tools/cli/probe_command.h"

#include <cstdio>
#include <optional>

#include "grpcpp/grpcpp.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/security/grpc_credentials.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {

int RunProbeCommand(const std::vector<std::string>& args) {
  FlagSet flags("probe");
  int64_t timeout_ms = 2000;
  flags.AddInt("timeout-ms", &timeout_ms, "how long to wait for the answer");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (flags.positional().size() != 1 || flags.positional()[0].empty()) {
    std::fprintf(stderr, "usage: lockstep probe HOST:PORT [--timeout-ms N]\n");
    return 2;
  }
  const std::string& address = flags.positional()[0];
  // A cluster member's call: the token (and TLS) named by the LOCKSTEP_* variables, as
  // the Kubernetes manifests set them.
  std::unique_ptr<v1::WorkerService::Stub> stub =
      v1::WorkerService::NewStub(security::CreateChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  context.set_wait_for_ready(true);  // a leader still starting is "not ready", not "refused"
  v1::HealthResponse response;
  const grpc::Status status = stub->Health(&context, v1::HealthRequest(), &response);
  if (!status.ok()) {
    std::fprintf(stderr, "lockstep probe: %s: %s\n", address.c_str(),
                 status.error_message().c_str());
    return 1;
  }
  if (response.state() != v1::HealthResponse::STATE_SERVING) {
    std::fprintf(stderr, "lockstep probe: %s: instance %s is %s%s%s\n", address.c_str(),
                 response.instance().c_str(),
                 v1::HealthResponse::State_Name(response.state()).c_str(),
                 response.message().empty() ? "" : ": ", response.message().c_str());
    return 1;
  }
  std::printf("%s serving (step %lld)\n", response.instance().c_str(),
              static_cast<long long>(response.step_count()));
  return 0;
}

}  // namespace lockstep::cli
