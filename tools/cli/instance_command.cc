#include "tools/cli/instance_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/stop_signal.h"
#include "fmt/format.h"
#include "runtime/config/config_yaml.h"
#include "runtime/launcher/process_supervisor.h"
#include "runtime/security/configured_security.h"
#include "runtime/worker/worker_identity.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

void Say(const std::string& line) {
  std::fprintf(stderr, "lockstep instance: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string SelfExecutable() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

// The NUMA nodes that have CPUs ("0-1"), or "" when the kernel does not say.
std::string CpuNumaNodes() {
  std::ifstream file("/sys/devices/system/node/has_cpu");
  std::string nodes;
  std::getline(file, nodes);
  return std::string(absl::StripAsciiWhitespace(nodes));
}

struct InstanceFlags {
  std::string config_path;
  std::string instance;
  std::string rendezvous;
  std::string leader_listen;      // rank 0's --listen; empty: the worker's default
  std::string advertise_address;  // passed to every rank when set
  std::string log_dir;            // empty: the ranks write to this process's stderr
  std::string lockstep_binary;
  int start_rank = 0;
  bool start_rank_set = false;
  int64_t grace_s = 10;
};

}  // namespace

int RunInstanceCommand(const std::vector<std::string>& args) {
  InstanceFlags f;
  FlagSet flags("instance");
  flags.AddPath("config", &f.config_path, "deployment YAML file (required)");
  flags.AddString("instance", &f.instance,
                  "instance name (else LOCKSTEP_INSTANCE, else LOCKSTEP_ROLE + the pod ordinal)");
  flags.AddString("rendezvous", &f.rendezvous,
                  "host:port of the router's gRPC (else LOCKSTEP_RENDEZVOUS)");
  flags.AddInt("start-rank", &f.start_rank,
               "first rank on this node (else LOCKSTEP_START_RANK, else LWS_WORKER_INDEX * "
               "ranks per node, else 0)");
  flags.AddString("leader-listen", &f.leader_listen,
                  "host:port of the leader's WorkerService (rank 0's --listen)");
  flags.AddString("advertise-address", &f.advertise_address,
                  "the host the ranks publish (else LOCKSTEP_ADVERTISE_ADDRESS, else the "
                  "worker's default)");
  flags.AddPath("log-dir", &f.log_dir, "one log file per rank here (default: stderr)");
  flags.AddPath("lockstep", &f.lockstep_binary, "the lockstep binary (default: this one)");
  flags.AddInt("grace-s", &f.grace_s, "seconds between SIGTERM and SIGKILL when stopping");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  f.start_rank_set = flags.WasSet("start-rank");
  const worker::Environment env = worker::ProcessEnvironment();
  if (f.rendezvous.empty()) f.rendezvous = env("LOCKSTEP_RENDEZVOUS").value_or("");
  if (f.advertise_address.empty()) {
    f.advertise_address = env("LOCKSTEP_ADVERTISE_ADDRESS").value_or("");
  }
  if (f.lockstep_binary.empty()) f.lockstep_binary = SelfExecutable();
  if (f.config_path.empty() || f.rendezvous.empty()) {
    Say("--config and --rendezvous (or LOCKSTEP_RENDEZVOUS) are required");
    return 2;
  }
  absl::StatusOr<config::DeploymentConfig> config = config::LoadDeploymentConfig(f.config_path);
  if (!config.ok()) {
    Say(std::string(config.status().message()));
    return 2;
  }
  // The ranks read the same files; a bad one stops the instance here, before any starts.
  if (absl::Status security = security::UseConfiguredClusterSecurity(config->security);
      !security.ok()) {
    Say(std::string(security.message()));
    return 2;
  }
  absl::StatusOr<const config::InstanceConfig*> instance =
      worker::ResolveInstance(f.instance, *config, env);
  if (!instance.ok()) {
    Say(std::string(instance.status().message()));
    return 2;
  }
  const config::InstanceConfig& self = **instance;
  absl::StatusOr<int> start = worker::ResolveStartRank(
      f.start_rank_set ? std::optional<int>(f.start_rank) : std::nullopt, self, config->placement,
      env);
  if (!start.ok()) {
    Say(std::string(start.status().message()));
    return 2;
  }
  const int per_node = worker::RanksPerNode(self, config->placement);
  std::vector<std::string> prefix;
  if (config->placement.numa_bind) {
    const std::string nodes = CpuNumaNodes();
    if (!nodes.empty()) prefix = {"numactl", absl::StrCat("--membind=", nodes)};
  }
  if (!f.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.log_dir, ec);
  }

  // Before starting children: a signal during the start must not be lost.
  const StopSignal& stop = StopSignal::Install();
  launcher::ProcessSupervisor supervisor;
  for (int rank = *start; rank < *start + per_node; ++rank) {
    launcher::ProcessSpec spec;
    spec.name = fmt::format("{}/rank{}", self.name, rank);
    spec.argv = prefix;
    spec.argv.insert(spec.argv.end(),
                     {f.lockstep_binary, "worker", "--config", f.config_path, "--instance",
                      self.name, "--rank", absl::StrCat(rank), "--device",
                      absl::StrCat(rank - *start), "--world-size", absl::StrCat(self.world_size),
                      "--rendezvous", f.rendezvous});
    if (rank == 0 && !f.leader_listen.empty()) {
      spec.argv.insert(spec.argv.end(), {"--listen", f.leader_listen});
    }
    if (!f.advertise_address.empty()) {
      spec.argv.insert(spec.argv.end(), {"--advertise-address", f.advertise_address});
    }
    // No --log-dir: the ranks inherit this process's stderr (a pod's is a pipe of the
    // container runtime's, which the pod's user cannot open again as /dev/stderr).
    spec.log_path =
        f.log_dir.empty()
            ? ""
            : (std::filesystem::path(f.log_dir) / fmt::format("{}.rank{}.log", self.name, rank))
                  .string();
    if (absl::Status status = supervisor.Start(spec); !status.ok()) {
      Say(std::string(status.message()));
      supervisor.StopAll(absl::Seconds(f.grace_s));
      return 1;
    }
  }
  Say(fmt::format("instance {}: ranks {}..{} of {} started", self.name, *start,
                  *start + per_node - 1, self.world_size));

  const absl::Duration grace = absl::Seconds(f.grace_s);
  while (!supervisor.Running().empty()) {
    launcher::ProcessSupervisor::WaitResult result = supervisor.Wait(absl::Hours(1), stop.fd());
    if (result.woke) {
      Say(fmt::format("signal {}: stopping the ranks", stop.signal_number()));
      bool clean = true;
      for (const launcher::ChildExit& exit : result.exited) clean &= exit.clean();
      for (const launcher::ChildExit& exit : supervisor.StopAll(grace)) {
        if (!exit.clean()) Say(exit.Describe());
        clean &= exit.clean();
      }
      return clean ? 0 : 1;
    }
    for (const launcher::ChildExit& exit : result.exited) {
      if (exit.clean()) {
        Say(exit.Describe());
        continue;
      }
      Say(fmt::format("{}: the instance is down, stopping its other ranks", exit.Describe()));
      for (const launcher::ChildExit& other : supervisor.StopAll(grace)) {
        if (!other.clean()) Say(other.Describe());
      }
      return 1;
    }
  }
  Say(fmt::format("instance {}: every rank exited cleanly", self.name));
  return 0;
}

}  // namespace lockstep::cli
