#include "runtime/launcher/launch_plan.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

namespace lockstep::launcher {
namespace {

// `configured` (host:port) with port 0 replaced by a free port; the host is kept.
absl::StatusOr<std::string> Resolve(const std::string& configured, const PlanOptions& options) {
  const size_t colon = configured.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(configured).substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(fmt::format("not host:port: '{}'", configured));
  }
  if (port != 0) return configured;
  absl::StatusOr<int> free = options.pick_port();
  if (!free.ok()) return free.status();
  return fmt::format("{}:{}", configured.substr(0, colon), *free);
}

std::string LogPath(const PlanOptions& options, const std::string& file) {
  return (std::filesystem::path(options.run_dir) / file).string();
}

}  // namespace

absl::StatusOr<LaunchPlan> BuildLaunchPlan(const config::DeploymentConfig& config,
                                           const PlanOptions& options) {
  LaunchPlan plan;
  absl::StatusOr<std::string> http = Resolve(config.router.http_listen, options);
  if (!http.ok()) return http.status();
  absl::StatusOr<std::string> grpc = Resolve(config.router.grpc_listen, options);
  if (!grpc.ok()) return grpc.status();
  plan.router_http = *http;
  plan.router_grpc = *grpc;
  plan.router = {"router",
                 {options.lockstep_binary, "router", "--config", options.config_path,
                  "--http-listen", plan.router_http, "--grpc-listen", plan.router_grpc},
                 LogPath(options, "router.log")};
  for (const config::InstanceConfig& instance : config.instances) {
    for (int64_t rank = 0; rank < instance.world_size; ++rank) {
      std::string listen;
      if (rank == 0 && !instance.leader_address.empty()) {
        listen = instance.leader_address;
      } else {
        absl::StatusOr<int> port = options.pick_port();
        if (!port.ok()) return port.status();
        listen = fmt::format("127.0.0.1:{}", *port);
      }
      plan.workers.push_back({fmt::format("{}/rank{}", instance.name, rank),
                              {options.lockstep_binary, "worker", "--config", options.config_path,
                               "--role", std::string(config::InstanceRoleName(instance.role)),
                               "--instance", instance.name, "--rank", fmt::format("{}", rank),
                               "--world-size", fmt::format("{}", instance.world_size),
                               "--rendezvous", plan.router_grpc, "--listen", listen},
                              LogPath(options, fmt::format("{}.rank{}.log", instance.name, rank))});
    }
  }
  return plan;
}

}  // namespace lockstep::launcher
