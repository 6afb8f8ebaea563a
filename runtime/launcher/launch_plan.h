// The processes of a local deployment (`lockstep launch`): the router, then every rank
// of every instance, on loopback, each logging to its own file in the run directory.
//
//   router:  LOCKSTEP router --config CONFIG --http-listen H --grpc-listen G
//                --address-file RUN_DIR/router.address.json
//   rank r:  LOCKSTEP worker --config CONFIG --role ROLE --instance NAME --rank r
//                --world-size N --rendezvous GRPC --listen 127.0.0.1:0
//
// No port is picked in advance: H and G are the configured addresses (port 0: the
// router binds any free port), and the router reports what it bound in its address
// file (router_address.h). The ranks start once it has; its gRPC address serves both
// RouterService (a leader registers and heartbeats there) and the rendezvous service
// (the ranks of an instance bootstrap their collectives there), so it is each worker's
// --rendezvous. Each rank listens on port 0 (its leader's WorkerService, its KV
// transfer service) and the leader registers the address it got; a configured
// leader_address is kept.
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/process_supervisor.h"

namespace lockstep::launcher {

struct PlanOptions {
  std::string lockstep_binary;  // the `lockstep` executable
  std::string config_path;      // passed to every process
  std::string run_dir;          // log files and the router's address file go here
};

struct LaunchPlan {
  std::string router_http;  // host:port the router bound
  std::string router_grpc;  // host:port the router bound
  ProcessSpec router;
  // The router again on the addresses it bound (the workers and clients know them):
  // how the launcher restarts a router that died.
  ProcessSpec router_restart;
  std::vector<ProcessSpec> workers;  // by instance, then rank
};

// Where the router writes the addresses it bound.
std::string RouterAddressFile(const PlanOptions& options);
// The router listening on `http_listen` and `grpc_listen` (default: the config's).
ProcessSpec RouterProcess(const config::DeploymentConfig& config, const PlanOptions& options,
                          const std::string& http_listen = "", const std::string& grpc_listen = "");
// Every rank of every instance, given the router's bound gRPC address.
std::vector<ProcessSpec> WorkerProcesses(const config::DeploymentConfig& config,
                                         const PlanOptions& options,
                                         const std::string& router_grpc);

// Starts the router under `supervisor`, waits until it reports its addresses (bounded
// by `timeout`; the router exiting or `wake_fd` becoming readable ends the wait, see
// ProcessSupervisor::WaitReady), and returns the plan with the workers' command lines.
// The workers are not started.
absl::StatusOr<LaunchPlan> StartRouter(const config::DeploymentConfig& config,
                                       const PlanOptions& options, ProcessSupervisor& supervisor,
                                       absl::Duration timeout, int wake_fd = -1);

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_LAUNCH_PLAN_H_
