// The local launcher (`lockstep launch`, tools/cli/launch_command.h): starts a whole
// local deployment from one YAML file (launch_plan.h), waits until the router is up and
// every configured instance is healthy (bounded), prints the endpoints (and writes them
// to RUN_DIR/endpoints.json), then supervises.
//
// SIGINT or SIGTERM stops everything (SIGTERM to every child, SIGKILL after the grace
// period) and returns 0. A child that dies is reported with its exit status, the last
// error line it logged and its log file. A dead rank takes its instance down (its other
// ranks are stopped: they cannot step without it) while the router and the other
// instances go on; with restart_instances the instance is started again, at most
// max_restarts times (ranks of one instance that died together count once). A dead
// router is started again on the addresses it had bound, at most max_restarts times
// (whatever restart_instances says): the instances register again with their next
// heartbeat, and the streams it was serving end with an error; past that budget
// everything stops (1), as it does on a failure to become ready. Children die with the
// launcher even if it is SIGKILLed (process_supervisor.h).
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace lockstep::launcher {

struct LaunchOptions {
  std::string config_path;      // the deployment YAML
  std::string run_dir;          // logs and endpoints.json (created)
  std::string lockstep_binary;  // started as the router and every rank
  absl::Duration ready_timeout = absl::Seconds(120);
  absl::Duration grace = absl::Seconds(10);  // between SIGTERM and SIGKILL on stop
  bool restart_instances = false;
  int64_t max_restarts = 3;  // per instance, and for the router
};

// Runs the deployment until a stop signal; returns the process exit status (0 on a
// stop signal, 1 when the router dies past its restarts or readiness fails, 2 on a bad
// config).
int RunLaunch(const LaunchOptions& options);

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_
