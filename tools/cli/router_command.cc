#include "tools/cli/router_command.h"

#include <cstdio>

#include "common/log.h"
#include "common/stop_signal.h"
#include "runtime/config/config_yaml.h"
#include "runtime/router/router_address.h"
#include "runtime/router/router_daemon.h"
#include "runtime/security/configured_security.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {

int RunRouterCommand(const std::vector<std::string>& args) {
  std::string config_path;
  std::string http_listen;
  std::string grpc_listen;
  std::string address_file;
  FlagSet flags("router");
  flags.AddPath("config", &config_path, "deployment YAML file (required)");
  flags.AddString("http-listen", &http_listen, "host:port for HTTP (overrides router.http_listen)");
  flags.AddString("grpc-listen", &grpc_listen, "host:port for gRPC (overrides router.grpc_listen)");
  flags.AddPath("address-file", &address_file,
                "once serving, write the bound addresses here (JSON; for port 0)");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (config_path.empty()) {
    std::fprintf(stderr, "lockstep router: --config is required\n%s", flags.Usage().c_str());
    return 2;
  }
  // Before any thread starts; a client that disconnects must not kill the process.
  const StopSignal& stop = StopSignal::Install();

  InitLogging({.role = "router"});
  absl::StatusOr<config::DeploymentConfig> config = config::LoadDeploymentConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "lockstep router: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (absl::Status security = security::UseConfiguredClusterSecurity(config->security);
      !security.ok()) {
    std::fprintf(stderr, "lockstep router: %s\n", std::string(security.message()).c_str());
    return 2;
  }
  if (!http_listen.empty()) config->router.http_listen = http_listen;
  if (!grpc_listen.empty()) config->router.grpc_listen = grpc_listen;
  absl::StatusOr<std::unique_ptr<router::RouterDaemon>> router =
      router::RouterDaemon::Start(*std::move(config), {.housekeeping_on_caller = true});
  if (!router.ok()) {
    std::fprintf(stderr, "lockstep router: %s\n", router.status().ToString().c_str());
    return 1;
  }
  std::printf("lockstep router: http %s grpc %s\n", (*router)->http_address().c_str(),
              (*router)->grpc_address().c_str());
  std::fflush(stdout);
  if (!address_file.empty()) {
    const absl::Status written = router::WriteRouterAddress(
        address_file, {(*router)->http_address(), (*router)->grpc_address()});
    if (!written.ok()) {
      std::fprintf(stderr, "lockstep router: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  // This thread sweeps and checks the instances until a stop signal (one thread less).
  (*router)->RunHousekeeping(
      [&stop](absl::Duration d) { return stop.WaitUntil(absl::Now() + d); });
  LOCKSTEP_LOG_INFO("router", "signal {}: shutting down", stop.signal_number());
  (*router)->Shutdown();
  FlushAllLoggers();
  return 0;
}

}  // namespace lockstep::cli
