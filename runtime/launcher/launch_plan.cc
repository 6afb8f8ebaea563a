#include "runtime/launcher/launch_plan.h"

#include <filesystem>

#include "fmt/format.h"
#include "runtime/router/router_address.h"

namespace lockstep::launcher {
namespace {

std::string InRunDir(const PlanOptions& options, const std::string& file) {
  return (std::filesystem::path(options.run_dir) / file).string();
}

}  // namespace

std::string RouterAddressFile(const PlanOptions& options) {
  return InRunDir(options, "router.address.json");
}

ProcessSpec RouterProcess(const config::DeploymentConfig& config, const PlanOptions& options,
                          const std::string& http_listen, const std::string& grpc_listen) {
  return {"router",
          {options.lockstep_binary, "router", "--config", options.config_path, "--http-listen",
           http_listen.empty() ? config.router.http_listen : http_listen, "--grpc-listen",
           grpc_listen.empty() ? config.router.grpc_listen : grpc_listen, "--address-file",
           RouterAddressFile(options)},
          InRunDir(options, "router.log")};
}

std::vector<ProcessSpec> WorkerProcesses(const config::DeploymentConfig& config,
                                         const PlanOptions& options,
                                         const std::string& router_grpc) {
  std::vector<ProcessSpec> workers;
  for (const config::InstanceConfig& instance : config.instances) {
    for (int64_t rank = 0; rank < instance.world_size; ++rank) {
      const std::string listen = rank == 0 && !instance.leader_address.empty()
                                     ? instance.leader_address
                                     : std::string("127.0.0.1:0");
      workers.push_back({fmt::format("{}/rank{}", instance.name, rank),
                         {options.lockstep_binary, "worker", "--config", options.config_path,
                          "--role", std::string(config::InstanceRoleName(instance.role)),
                          "--instance", instance.name, "--rank", fmt::format("{}", rank),
                          "--world-size", fmt::format("{}", instance.world_size), "--rendezvous",
                          router_grpc, "--listen", listen},
                         InRunDir(options, fmt::format("{}.rank{}.log", instance.name, rank))});
    }
  }
  return workers;
}

absl::StatusOr<LaunchPlan> StartRouter(const config::DeploymentConfig& config,
                                       const PlanOptions& options, ProcessSupervisor& supervisor,
                                       absl::Duration timeout, int wake_fd) {
  const std::string address_file = RouterAddressFile(options);
  std::error_code ignored;
  std::filesystem::remove(address_file, ignored);  // one from an earlier run is stale
  LaunchPlan plan;
  plan.router = RouterProcess(config, options);
  if (absl::Status status = supervisor.Start(plan.router); !status.ok()) return status;
  absl::StatusOr<router::RouterAddress> address = absl::NotFoundError("");
  absl::Status ready = supervisor.WaitReady(
      [&] {
        address = router::ReadRouterAddress(address_file);
        return address.ok();
      },
      timeout, absl::Milliseconds(50), wake_fd);
  if (!ready.ok()) {
    return absl::Status(
        ready.code(), fmt::format("the router did not report its addresses in {}: {}", address_file,
                                  std::string(ready.message())));
  }
  plan.router_http = address->http;
  plan.router_grpc = address->grpc;
  plan.router_restart = RouterProcess(config, options, plan.router_http, plan.router_grpc);
  plan.workers = WorkerProcesses(config, options, plan.router_grpc);
  return plan;
}

}  // namespace lockstep::launcher
