#include "tools/cli/expert_loads_command.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/security/grpc_credentials.h"
#include "runtime/worker/expert_load_stats.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {

int RunExpertLoadsCommand(const std::vector<std::string>& args) {
  FlagSet flags("expert-loads");
  std::string out;
  int64_t timeout_ms = 5000;
  flags.AddPath("out", &out, "file to write the dump to (default: stdout)");
  flags.AddInt("timeout-ms", &timeout_ms, "how long to wait for the leader's answer");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (flags.positional().size() != 1 || flags.positional()[0].empty()) {
    std::fprintf(stderr, "usage: lockstep expert-loads HOST:PORT [--out FILE] [--timeout-ms N]\n");
    return 2;
  }
  const std::string& address = flags.positional()[0];
  std::unique_ptr<v1::WorkerService::Stub> stub =
      v1::WorkerService::NewStub(security::CreateChannel(address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  v1::StatsResponse response;
  const grpc::Status status = stub->Stats(&context, v1::StatsRequest(), &response);
  if (!status.ok()) {
    std::fprintf(stderr, "lockstep expert-loads: %s: %s\n", address.c_str(),
                 status.error_message().c_str());
    return 1;
  }
  const absl::StatusOr<engine::ExpertLoadSnapshot> loads =
      worker::ExpertLoadFromStats(response.expert_load());
  if (!loads.ok()) {
    std::fprintf(stderr, "lockstep expert-loads: instance %s: %s\n", response.instance().c_str(),
                 std::string(loads.status().message()).c_str());
    return 1;
  }
  const std::string text = loads->Format();
  if (out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (const absl::Status s = engine::WriteStringToFile(out, text); !s.ok()) {
    std::fprintf(stderr, "lockstep expert-loads: %s\n", s.ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "instance %s: window %lld of %lld forwards written to %s\n",
               response.instance().c_str(), static_cast<long long>(loads->windows),
               static_cast<long long>(loads->forwards), out.c_str());
  return 0;
}

}  // namespace lockstep::cli
