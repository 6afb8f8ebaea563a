#include "tools/cli/worker_command.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "common/stop_signal.h"
#include "runtime/config/config_yaml.h"
#include "runtime/security/configured_security.h"
#include "runtime/worker/worker.h"
#include "runtime/worker/advertise_address.h"
#include "runtime/worker/worker_identity.h"
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
  std::string config_path, role, instance, rendezvous, listen, advertise_address;
  int rank = 0, world_size = 1, device = 0;
  int64_t bootstrap_timeout_s = 60;
  flags.AddPath("config", &config_path, "deployment YAML file");
  flags.AddString("role", &role, "aggregated, context or generation (checked against the file)");
  flags.AddString("instance", &instance,
                  "instance name in the file (else LOCKSTEP_INSTANCE, or the pod's ordinal)");
  flags.AddInt("rank", &rank, "this rank (else LOCKSTEP_RANK, else SLURM_PROCID)");
  flags.AddInt("world-size", &world_size, "ranks of the instance (else the file's world_size)");
  flags.AddInt("device", &device, "local GPU (else LOCKSTEP_DEVICE, else SLURM_LOCALID)");
  flags.AddString("rendezvous", &rendezvous,
                  "host:port of the router (rendezvous + registry; else LOCKSTEP_RENDEZVOUS)");
  flags.AddString("listen", &listen,
                  "host:port for the leader's WorkerService and the KV transfer service "
                  "(else the instance's leader_address on rank 0, else ADVERTISE:0); a "
                  "wildcard host (0.0.0.0) means the advertised one");
  flags.AddString("advertise-address", &advertise_address,
                  "the host other hosts reach this rank at (else LOCKSTEP_ADVERTISE_ADDRESS, "
                  "else the address of the interface that routes to the rendezvous)");
  flags.AddInt("bootstrap-timeout-s", &bootstrap_timeout_s, "wait this long for the other ranks");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  const worker::Environment env = worker::ProcessEnvironment();
  if (rendezvous.empty()) rendezvous = env("LOCKSTEP_RENDEZVOUS").value_or("");
  if (config_path.empty() || rendezvous.empty()) {
    std::fprintf(stderr,
                 "lockstep worker: --config and --rendezvous (or LOCKSTEP_RENDEZVOUS) are "
                 "required\n");
    return 2;
  }
  absl::StatusOr<config::DeploymentConfig> deployment = config::LoadDeploymentConfig(config_path);
  if (!deployment.ok()) return Fail(deployment.status().ToString());
  worker::IdentityFlags identity_flags;
  identity_flags.instance = instance;
  if (flags.WasSet("rank")) identity_flags.rank = rank;
  if (flags.WasSet("world-size")) identity_flags.world_size = world_size;
  if (flags.WasSet("device")) identity_flags.device = device;
  absl::StatusOr<worker::WorkerIdentity> identity =
      worker::ResolveWorkerIdentity(identity_flags, *deployment, env);
  if (!identity.ok()) return Fail(std::string(identity.status().message()));
  const config::InstanceConfig& self = *identity->instance;
  InitLogging({.role = role.empty() ? "worker" : role, .instance = self.name,
               .rank = identity->rank});
  if (absl::Status security = security::UseConfiguredClusterSecurity(deployment->security);
      !security.ok()) {
    return Fail(std::string(security.message()));
  }
  if (!role.empty() && config::InstanceRoleName(self.role) != role) {
    const std::string actual(config::InstanceRoleName(self.role));
    return Fail(absl::StrCat("--role ", role, " but instance ", self.name, " is ", actual, " in ",
                             config_path));
  }
  absl::StatusOr<std::string> advertise =
      worker::ResolveAdvertiseHost(advertise_address, env, rendezvous);
  if (!advertise.ok()) return Fail(std::string(advertise.status().message()));
  absl::StatusOr<std::string> listen_address = worker::ListenAddress(
      listen.empty() && identity->rank == 0 ? self.leader_address : listen, *advertise);
  if (!listen_address.ok()) return Fail(std::string(listen_address.status().message()));
  absl::StatusOr<std::string> gloo_host = worker::ResolveGlooHost(env, *advertise);
  if (!gloo_host.ok()) return Fail(std::string(gloo_host.status().message()));
  LOCKSTEP_LOG_INFO("worker",
                    "instance {} rank {} of {} (rank from {}), local device {}, listening on {}, "
                    "gloo on {}",
                    self.name, identity->rank, identity->world_size, identity->rank_source,
                    identity->local_device, *listen_address, *gloo_host);
  instance = self.name;
  rank = identity->rank;
  world_size = identity->world_size;
  worker::WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = instance;
  options.rank = rank;
  options.world_size = world_size;
  options.rendezvous_address = rendezvous;
  options.listen_address = *listen_address;
  options.gloo_host = *gloo_host;
  options.device = identity->local_device;
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
