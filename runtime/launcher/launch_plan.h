// The processes of a local deployment (`lockstep launch`): the router, then every rank
// of every instance, on loopback with free ports, each logging to its own file in the
// run directory.
//
//   router:  LOCKSTEP router --config CONFIG --http-listen 127.0.0.1:H --grpc-listen 127.0.0.1:G
//   rank r:  LOCKSTEP worker --config CONFIG --role ROLE --instance NAME --rank r
//                --world-size N --rendezvous 127.0.0.1:G --listen 127.0.0.1:P
//
// The router's gRPC address serves both RouterService (a leader registers and
// heartbeats there) and the rendezvous service (the ranks of an instance bootstrap
// their collectives there), so it is each worker's --rendezvous. Every rank gets its
// own --listen port: the leader's WorkerService, and each rank's KV transfer service.
// Ports configured as non-zero in the file are kept; port 0 becomes a free port.
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/process_supervisor.h"

namespace lockstep::launcher {

struct LaunchPlan {
  std::string router_http;  // host:port
  std::string router_grpc;  // host:port
  ProcessSpec router;
  std::vector<ProcessSpec> workers;  // by instance, then rank
};

struct PlanOptions {
  std::string lockstep_binary;  // the `lockstep` executable
  std::string config_path;      // passed to every process
  std::string run_dir;          // log files go here
  // Returns a free port on 127.0.0.1 (injectable for tests).
  std::function<absl::StatusOr<int>()> pick_port;
};

absl::StatusOr<LaunchPlan> BuildLaunchPlan(const config::DeploymentConfig& config,
                                           const PlanOptions& options);

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_
