#include "tools/cli/plan_command.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include "absl/strings/str_split.h"
#include "deploy/slurm/slurm_plan.h"
#include "runtime/config/config_yaml.h"
#include "runtime/security/secret.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

constexpr char kUsage[] =
    "usage: lockstep plan slurm CONFIG --nodes n1,n2,... [--run-dir DIR] [--lockstep PATH]\n";

std::string Absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

// Writes a fresh cluster token to `path` (0600) unless one is there: a job that reuses
// its run directory keeps its token.
absl::Status EnsureTokenFile(const std::string& path) {
  if (security::ReadSecretFile(path).ok()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return absl::InternalError("cannot create the directory of " + path + ": " + ec.message());
  absl::StatusOr<std::string> token = security::GenerateToken();
  if (!token.ok()) return token.status();
  return security::WriteSecretFile(path, *token);
}

}  // namespace

int RunPlanCommand(const std::vector<std::string>& args) {
  FlagSet flags("plan");
  std::string nodes, run_dir = "lockstep-run", lockstep_binary = "lockstep";
  int max_backoff_s = 30;
  flags.AddString("nodes", &nodes, "the job's nodes, comma-separated (scontrol show hostnames)");
  flags.AddPath("run-dir", &run_dir, "shared directory for the logs and the router's addresses");
  flags.AddString("lockstep", &lockstep_binary, "the lockstep binary as the nodes run it");
  flags.AddInt("max-backoff-s", &max_backoff_s, "longest wait before a step is restarted");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  const std::vector<std::string>& positional = flags.positional();
  if (positional.size() != 2 || positional[0] != "slurm") {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  const std::string config_path = Absolute(ResolveUserPath(positional[1]));
  absl::StatusOr<config::DeploymentConfig> config = config::LoadDeploymentConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "lockstep plan: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  deploy::SlurmPlanOptions options;
  options.config_path = config_path;
  options.nodes = absl::StrSplit(nodes, ',', absl::SkipEmpty());
  options.run_dir = Absolute(run_dir);
  options.lockstep_binary = lockstep_binary;
  options.max_backoff_s = max_backoff_s;
  absl::StatusOr<std::string> plan = deploy::PlanSlurm(*config, options);
  if (!plan.ok()) {
    std::fprintf(stderr, "lockstep plan: %s\n", std::string(plan.status().message()).c_str());
    return 2;
  }
  if (const std::string token = deploy::SlurmClusterTokenFile(*config, options); !token.empty()) {
    if (absl::Status written = EnsureTokenFile(token); !written.ok()) {
      std::fprintf(stderr, "lockstep plan: cluster token: %s\n",
                   std::string(written.message()).c_str());
      return 1;
    }
  }
  std::fputs(plan->c_str(), stdout);
  return 0;
}

}  // namespace lockstep::cli
