#include "tools/cli/worker_command.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "common/stop_signal.h"
#include "runtime/config/config_yaml.h"
#include "runtime/worker/worker.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

int Fail(const std::string& message) {
  LOCKSTEP_LOG_ERROR("worker", "{}", message);
  std::fprintf(stderr, "lockstep worker: %s\n", message.c_str());
  return 1;
}

}  // namespace

int RunWorkerCommand(const std::vector<std::string>& args) {
  FlagSet flags("worker");
  std::string config_path, role, instance, rendezvous, listen = "127.0.0.1:0";
  int rank = 0, world_size = 1;
  int64_t bootstrap_timeout_s = 60;
  flags.AddPath("config", &config_path, "deployment YAML file");
  flags.AddString("role", &role, "aggregated, context or generation (checked against the file)");
  flags.AddString("instance", &instance, "instance name in the file");
  flags.AddInt("rank", &rank, "this rank");
  flags.AddInt("world-size", &world_size, "ranks of the instance");
  flags.AddString("rendezvous", &rendezvous, "host:port of the router (rendezvous + registry)");
  flags.AddString("listen", &listen, "host:port for the leader's WorkerService");
  flags.AddInt("bootstrap-timeout-s", &bootstrap_timeout_s, "wait this long for the other ranks");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (config_path.empty() || instance.empty() || rendezvous.empty()) {
    std::fprintf(stderr, "lockstep worker: --config, --instance and --rendezvous are required\n");
    return 2;
  }
  InitLogging({.role = role.empty() ? "worker" : role, .instance = instance, .rank = rank});
  absl::StatusOr<config::DeploymentConfig> deployment = config::LoadDeploymentConfig(config_path);
  if (!deployment.ok()) return Fail(deployment.status().ToString());
  if (const config::InstanceConfig* self = deployment->FindInstance(instance);
      self != nullptr && !role.empty() && config::InstanceRoleName(self->role) != role) {
    const std::string actual(config::InstanceRoleName(self->role));
    return Fail(absl::StrCat("--role ", role, " but instance ", instance, " is ", actual, " in ",
                             config_path));
  }
  worker::WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = instance;
  options.rank = rank;
  options.world_size = world_size;
  options.rendezvous_address = rendezvous;
  options.listen_address = listen;
  options.bootstrap_timeout = absl::Seconds(bootstrap_timeout_s);
  absl::StatusOr<std::unique_ptr<worker::Worker>> worker =
      worker::Worker::Start(std::move(options));
  if (!worker.ok()) return Fail(worker.status().ToString());
  // A stop signal asks the instance to drain; Run returns once it has.
  const StopSignal& stop = StopSignal::Install();
  absl::Notification ran;
  std::thread on_stop([&] {
    while (!ran.HasBeenNotified()) {
      if (stop.WaitUntil(absl::Now() + absl::Milliseconds(100))) {
        (*worker)->RequestStop();
        return;
      }
    }
  });
  const absl::Status run = (*worker)->Run();
  ran.Notify();
  on_stop.join();
  if (!run.ok()) return Fail(run.ToString());
  return 0;
}

}  // namespace lockstep::cli
