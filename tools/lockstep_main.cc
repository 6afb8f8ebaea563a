// The `lockstep` CLI: one binary, one subcommand per job. `tools/lockstep` (bash) builds
// it and forwards every command it does not handle itself.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench/bench_command.h"
#include "tools/cli/command.h"
#include "tools/cli/expert_loads_command.h"
#include "tools/cli/instance_command.h"
#include "tools/cli/launch_command.h"
#include "tools/cli/make_model_command.h"
#include "tools/cli/plan_command.h"
#include "tools/cli/probe_command.h"
#include "tools/cli/render_command.h"
#include "tools/cli/router_command.h"
#include "tools/cli/sim_command.h"
#include "tools/cli/worker_command.h"
#include "tools/demo.h"

namespace lockstep {
namespace {

std::vector<cli::Command> Commands() {
  return {
      {"demo", "run the end-to-end demo", RunDemo},
      {"make-model", "write a tiny random model (+ draft) for the CPU engine",
       cli::RunMakeModelCommand},
      {"router", "run the router (OpenAI HTTP API, gRPC, metrics)", cli::RunRouterCommand},
      {"launch", "start a local deployment (router + every rank) from a YAML file",
       cli::RunLaunchCommand},
      {"sim", "run the deterministic multi-rank simulator", cli::RunSimCommand},
      {"worker", "run one rank of an instance", cli::RunWorkerCommand},
      {"instance", "run this node's ranks of one instance; exit when one fails",
       cli::RunInstanceCommand},
      {"probe", "exit 0 iff an instance leader answers Health as serving", cli::RunProbeCommand},
      {"expert-loads", "write an instance's last expert-load window for the offline planner",
       cli::RunExpertLoadsCommand},
      {"plan", "print the Slurm job script of a deployment (plan slurm CONFIG --nodes ...)",
       cli::RunPlanCommand},
      {"render", "write Kubernetes manifests (render k8s CONFIG --image I --out DIR)",
       cli::RunRenderCommand},
      {"bench", "run a workload against a deployment and report latency and throughput",
       bench::RunBench},
  };
}

int PrintHelp(const std::vector<cli::Command>& commands) {
  std::printf("usage: lockstep COMMAND [flags]   (lockstep COMMAND --help for its flags)\n\n");
  for (const cli::Command& command : commands) {
    std::printf("  %-12s %s\n", command.name.c_str(), command.summary.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  const std::vector<lockstep::cli::Command> commands = lockstep::Commands();
  if (argc < 2 || std::string(argv[1]) == "help" || std::string(argv[1]) == "--help") {
    return lockstep::PrintHelp(commands);
  }
  const std::string name = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const lockstep::cli::Command& command : commands) {
    if (command.name == name) return command.run(args);
  }
  std::fprintf(stderr, "lockstep: unknown command '%s' (try 'lockstep help')\n", name.c_str());
  return 2;
}
