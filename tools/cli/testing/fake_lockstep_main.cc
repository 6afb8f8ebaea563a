// A stand-in for the `lockstep` binary in launcher tests: `router`, `launch`,
// `instance` and `probe` are the real subcommands; `worker` is a fake rank: the leader (rank 0)
// serves a fake WorkerService on --listen, registers at --rendezvous and heartbeats; every rank
// exits 0 on SIGTERM. A rank of an instance with `engine: cuda` fails at start as the real worker
// does (an error logged, status 1).
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/log.h"
#include "runtime/config/config_yaml.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/security/configured_security.h"
#include "tools/cli/flags.h"
#include "tools/cli/instance_command.h"
#include "tools/cli/launch_command.h"
#include "tools/cli/probe_command.h"
#include "tools/cli/router_command.h"

namespace {

int RunFakeWorker(const std::vector<std::string>& args) {
  std::string config_path, role, instance, rendezvous, listen, advertise_address;
  int64_t rank = 0, world_size = 1, device = 0;
  lockstep::cli::FlagSet flags("worker");
  flags.AddString("config", &config_path, "");
  flags.AddString("role", &role, "");
  flags.AddString("instance", &instance, "");
  flags.AddInt("rank", &rank, "");
  flags.AddInt("world-size", &world_size, "");
  flags.AddString("rendezvous", &rendezvous, "");
  flags.AddString("listen", &listen, "");
  flags.AddInt("device", &device, "");
  flags.AddString("advertise-address", &advertise_address, "");
  if (!flags.Parse(args).ok()) return 2;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  absl::StatusOr<lockstep::config::DeploymentConfig> config =
      lockstep::config::LoadDeploymentConfig(config_path);
  if (!config.ok()) return 3;
  const lockstep::config::InstanceConfig* self = config->FindInstance(instance);
  if (self != nullptr && self->engine == lockstep::config::EngineKind::kCuda) {
    LOCKSTEP_LOG_ERROR("worker", "engine cuda: the fake worker has no CUDA engine");
    std::fprintf(stderr, "lockstep worker: engine cuda: the fake worker has no CUDA engine\n");
    return 1;
  }
  std::unique_ptr<lockstep::router::testing::FakeWorker> worker;
  if (rank == 0) {
    if (!lockstep::security::UseConfiguredClusterSecurity(config->security).ok()) return 3;
    lockstep::v1::InstanceRole wire_role = role == "context" ? lockstep::v1::INSTANCE_ROLE_CONTEXT
                                           : role == "generation"
                                               ? lockstep::v1::INSTANCE_ROLE_GENERATION
                                               : lockstep::v1::INSTANCE_ROLE_AGGREGATED;
    auto started = lockstep::router::testing::FakeWorker::Start(
        {.name = instance,
         .role = wire_role,
         .world_size = static_cast<int32_t>(world_size),
         .model = config->model.name,
         .listen = listen});
    if (!started.ok()) return 4;
    worker = *std::move(started);
    if (!worker->Register(rendezvous).ok()) return 5;
    worker->StartHeartbeats(rendezvous, absl::Milliseconds(config->router.heartbeat_interval_ms));
  }
  std::printf("fake worker %s rank %lld up\n", instance.c_str(), static_cast<long long>(rank));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&term, &sig);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "router") return lockstep::cli::RunRouterCommand(args);
  if (command == "launch") return lockstep::cli::RunLaunchCommand(args);
  if (command == "instance") return lockstep::cli::RunInstanceCommand(args);
  if (command == "probe") return lockstep::cli::RunProbeCommand(args);
  if (command == "worker") return RunFakeWorker(args);
  std::fprintf(stderr, "fake lockstep: unknown command %s\n", command.c_str());
  return 2;
}
