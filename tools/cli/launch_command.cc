#include "tools/cli/launch_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/time/clock.h"
#include "fmt/format.h"
#include "runtime/launcher/launcher.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {
namespace {

void Complain(const std::string& line) {
  std::fprintf(stderr, "lockstep launch: %s\n", line.c_str());
  std::fflush(stderr);
}

std::string DefaultRunDir() {
  return fmt::format("runs/launch-{}-{}",
                     absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()),
                     getpid());
}

std::string SelfExecutable() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

}  // namespace

int RunLaunchCommand(const std::vector<std::string>& args) {
  launcher::LaunchOptions options;
  int64_t ready_timeout_s = 120, grace_s = 10;
  FlagSet flag_set("launch");
  flag_set.AddPath("config", &options.config_path, "deployment YAML (or the first argument)");
  flag_set.AddPath("run-dir", &options.run_dir, "directory for logs (default runs/launch-TIME)");
  flag_set.AddPath("lockstep", &options.lockstep_binary,
                   "the lockstep binary to start (default: this one)");
  flag_set.AddInt("ready-timeout-s", &ready_timeout_s, "seconds to wait for readiness");
  flag_set.AddInt("grace-s", &grace_s, "seconds between SIGTERM and SIGKILL on stop");
  flag_set.AddBool("restart-instances", &options.restart_instances,
                   "start an instance again when one of its ranks dies");
  flag_set.AddInt("max-restarts", &options.max_restarts,
                  "restarts per instance (and of the router) at most");
  if (absl::Status status = flag_set.Parse(args); !status.ok()) {
    Complain(fmt::format("{}\n{}", std::string(status.message()), flag_set.Usage()));
    return 2;
  }
  if (flag_set.help_requested()) {
    std::printf("usage: lockstep launch CONFIG [flags]\n%s", flag_set.Usage().c_str());
    return 0;
  }
  if (options.config_path.empty() && !flag_set.positional().empty()) {
    options.config_path = ResolveUserPath(flag_set.positional()[0]);
  }
  if (options.config_path.empty()) {
    Complain("usage: lockstep launch CONFIG [flags]");
    return 2;
  }
  if (options.run_dir.empty()) options.run_dir = ResolveUserPath(DefaultRunDir());
  if (options.lockstep_binary.empty()) options.lockstep_binary = SelfExecutable();
  if (ready_timeout_s < 1 || grace_s < 0) {
    Complain("--ready-timeout-s must be >= 1 and --grace-s >= 0");
    return 2;
  }
  options.ready_timeout = absl::Seconds(ready_timeout_s);
  options.grace = absl::Seconds(grace_s);
  return launcher::RunLaunch(options);
}

}  // namespace lockstep::cli
