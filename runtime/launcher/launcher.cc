#include "runtime/launcher/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>

#include "common/stop_signal.h"
#include "fmt/format.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/config/config_yaml.h"
#include "runtime/launcher/launch_plan.h"
#include "runtime/launcher/process_supervisor.h"
#include "runtime/router/http/router_http_client.h"
#include "runtime/security/configured_security.h"

namespace lockstep::launcher {
namespace {

using nlohmann::json;

void Say(const std::string& line) {
  std::printf("lockstep launch: %s\n", line.c_str());
  std::fflush(stdout);
}

void Complain(const std::string& line) {
  std::fprintf(stderr, "lockstep launch: %s\n", line.c_str());
  std::fflush(stderr);
}

// GET `path` from the router's HTTP API at `url` (an HTTPS router's certificate checked
// against router.https_ca_file); the parsed JSON, or null.
json GetJson(const std::string& url, const config::DeploymentConfig& config,
             const std::string& path) {
  absl::StatusOr<std::unique_ptr<httplib::Client>> client =
      router::NewRouterHttpClient(url, config.router.https_ca_file);
  if (!client.ok()) return json();
  (*client)->set_connection_timeout(1, 0);
  (*client)->set_read_timeout(2, 0);
  httplib::Result result = (*client)->Get(path.c_str());
  if (!result || result->status != 200) return json();
  return json::parse(result->body, nullptr, /*allow_exceptions=*/false);
}

// True when /health lists every configured instance as healthy.
bool AllInstancesHealthy(const std::string& url, const config::DeploymentConfig& config) {
  const json health = GetJson(url, config, "/health");
  if (!health.is_object() || !health.contains("instances") || !health["instances"].is_array()) {
    return false;
  }
  size_t healthy = 0;
  for (const config::InstanceConfig& instance : config.instances) {
    for (const json& entry : health["instances"]) {
      if (entry.is_object() && entry.value("name", "") == instance.name &&
          entry.value("state", "") == "healthy") {
        ++healthy;
      }
    }
  }
  return healthy == config.instances.size();
}

void WriteEndpoints(const std::string& run_dir, const LaunchPlan& plan,
                    const config::DeploymentConfig& config) {
  json instances = json::array();
  for (const config::InstanceConfig& instance : config.instances) {
    instances.push_back({{"name", instance.name},
                         {"role", std::string(config::InstanceRoleName(instance.role))},
                         {"world_size", instance.world_size}});
  }
  json endpoints = {
      {"http", plan.router_http}, {"grpc", plan.router_grpc}, {"model", config.model.name},
      {"run_dir", run_dir},       {"pid", getpid()},          {"instances", instances}};
  const std::string path = (std::filesystem::path(run_dir) / "endpoints.json").string();
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << endpoints.dump(2) << "\n";
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic: readers never see half a file
}

// The instance a worker process belongs to ("gen0/rank2" -> "gen0").
std::string InstanceOf(const std::string& process) { return process.substr(0, process.find('/')); }

// Keeps the deployment running until a stop signal (returns 0). A dead router is
// started again on the addresses it had (the instances register again), at most
// max_restarts times; then the deployment stops (`fail`). A dead rank takes its
// instance down, since the other ranks cannot step without it, and with
// --restart-instances the instance starts again.
int Supervise(ProcessSupervisor& supervisor, const LaunchPlan& plan, const LaunchOptions& options,
              const StopSignal& stop, const std::function<int(const absl::Status&)>& fail) {
  const absl::Duration grace = options.grace;
  const std::string& router = plan.router.name;
  std::deque<ChildExit> pending;
  std::map<std::string, int64_t> restarts;  // by instance
  int64_t router_restarts = 0;
  while (true) {
    if (pending.empty()) {
      ProcessSupervisor::WaitResult result = supervisor.Wait(absl::Hours(1), stop.fd());
      if (result.woke) {
        Say(fmt::format("signal {}: stopping the deployment", stop.signal_number()));
        for (const ChildExit& exit : supervisor.StopAll(grace)) {
          if (!exit.clean()) Complain(exit.Describe());
        }
        Say("stopped");
        return 0;
      }
      pending.insert(pending.end(), result.exited.begin(), result.exited.end());
      continue;
    }
    const ChildExit exit = pending.front();
    pending.pop_front();
    Complain(exit.Describe());
    if (exit.name == router) {
      if (router_restarts >= options.max_restarts) {
        return fail(absl::AbortedError(
            fmt::format("the router ended (restarted {} times already)", router_restarts)));
      }
      ++router_restarts;
      Say(
          fmt::format("restarting the router on http {} and grpc {} (restart {} of {}); the "
                      "instances register again",
                      plan.router_http, plan.router_grpc, router_restarts, options.max_restarts));
      if (absl::Status status = supervisor.Start(plan.router_restart); !status.ok()) {
        return fail(status);
      }
      continue;
    }
    const std::string instance = InstanceOf(exit.name);
    // Other ranks of this instance reaped in the same wait went down with it: their
    // exits are not the instance's next failure (nor that of the ranks started below).
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->name != router && InstanceOf(it->name) == instance) {
        Complain(it->Describe());
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<std::string> others;
    for (const ProcessSpec& worker : plan.workers) {
      if (InstanceOf(worker.name) == instance && supervisor.PidOf(worker.name) >= 0) {
        others.push_back(worker.name);
      }
    }
    if (!others.empty()) {
      Complain(fmt::format("instance {} lost a rank: stopping its other ranks", instance));
      for (const ChildExit& stopped : supervisor.Stop(others, grace)) {
        // Those stopped on purpose are expected; any other child that ended meanwhile
        // is handled in turn.
        if (std::find(others.begin(), others.end(), stopped.name) == others.end()) {
          pending.push_back(stopped);
        }
      }
    }
    if (!options.restart_instances || restarts[instance] >= options.max_restarts) {
      Complain(fmt::format("instance {} is down; the router no longer routes to it", instance));
      continue;
    }
    ++restarts[instance];
    Say(fmt::format("restarting instance {} (restart {} of {})", instance, restarts[instance],
                    options.max_restarts));
    for (const ProcessSpec& worker : plan.workers) {
      if (InstanceOf(worker.name) != instance || supervisor.PidOf(worker.name) >= 0) continue;
      if (absl::Status status = supervisor.Start(worker); !status.ok()) {
        Complain(std::string(status.message()));
      }
    }
  }
}

// Starts everything, then supervises (see Supervise).
int Launch(const LaunchOptions& options, const StopSignal& stop) {
  absl::StatusOr<config::DeploymentConfig> config =
      config::LoadDeploymentConfig(options.config_path);
  if (!config.ok()) {
    Complain(std::string(config.status().message()));
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(options.run_dir, ec);
  if (ec) {
    Complain(fmt::format("cannot create run directory {}: {}", options.run_dir, ec.message()));
    return 2;
  }
  // The deployment's processes share a cluster token (docs/security.md).
  if (absl::StatusOr<std::string> token =
          security::EnsureConfiguredClusterToken(options.run_dir, config->security);
      !token.ok()) {
    Complain(std::string(token.status().message()));
    return 2;
  }
  const PlanOptions plan_options = {.lockstep_binary = options.lockstep_binary,
                                    .config_path = options.config_path,
                                    .run_dir = options.run_dir};
  const absl::Duration ready_timeout = options.ready_timeout;
  const absl::Duration grace = options.grace;
  ProcessSupervisor supervisor;
  auto fail = [&](const absl::Status& status) {
    Complain(std::string(status.message()));
    Complain("stopping the deployment");
    for (const ChildExit& exit : supervisor.StopAll(grace)) {
      if (!exit.clean()) Complain(exit.Describe());
    }
    return status.code() == absl::StatusCode::kCancelled ? 0 : 1;
  };

  int64_t processes = 1;  // the router
  for (const config::InstanceConfig& instance : config->instances) processes += instance.world_size;
  Say(fmt::format("run directory {} ({} processes)", options.run_dir, processes));
  absl::StatusOr<LaunchPlan> plan =
      StartRouter(*config, plan_options, supervisor, ready_timeout, stop.fd());
  if (!plan.ok()) return fail(plan.status());
  const std::string http = router::RouterHttpUrl(config->router, plan->router_http);
  for (const ProcessSpec& worker : plan->workers) {
    if (absl::Status status = supervisor.Start(worker); !status.ok()) return fail(status);
  }
  const absl::Status ready =
      supervisor.WaitReady([&] { return AllInstancesHealthy(http, *config); }, ready_timeout,
                           absl::Milliseconds(200), stop.fd());
  if (!ready.ok()) return fail(ready);

  WriteEndpoints(options.run_dir, *plan, *config);
  Say("ready");
  std::printf("  OpenAI API  %s/v1  (model %s)\n", http.c_str(), config->model.name.c_str());
  std::printf("  gRPC        %s\n", plan->router_grpc.c_str());
  std::printf("  metrics     %s/metrics\n", http.c_str());
  for (const config::InstanceConfig& instance : config->instances) {
    std::printf("  instance    %s: %s, DEP%lld\n", instance.name.c_str(),
                std::string(config::InstanceRoleName(instance.role)).c_str(),
                static_cast<long long>(instance.world_size));
  }
  std::printf("  logs        %s\n", options.run_dir.c_str());
  std::printf("Ctrl-C stops everything.\n");
  std::fflush(stdout);

  return Supervise(supervisor, *plan, options, stop, fail);
}

}  // namespace

int RunLaunch(const LaunchOptions& options) {
  // Stop signals wake the supervision loop through the stop fd (children start with
  // default handlers, see process_supervisor.cc). A broken pipe must not kill the launcher.
  return Launch(options, StopSignal::Install());
}

}  // namespace lockstep::launcher
