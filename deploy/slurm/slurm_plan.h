// `lockstep plan slurm`: the job script body that runs a deployment inside one Slurm
// allocation (deploy/slurm/README.md). A pure function of the config and the job's
// nodes; deploy/slurm/lockstep.sbatch runs what it prints.
//
// The plan: the router as one step on the first node; then one step per instance,
// `srun --overlap -N<nodes> -n<world_size> -w <its nodes> --kill-on-bad-exit=1 lockstep
// worker ...`, whose tasks are the ranks (rank = SLURM_PROCID, device = SLURM_LOCALID,
// runtime/worker/worker_identity.h). Instances take the nodes in order,
// placement.nodes_per_instance each; the router shares the first. Every step runs in
// a restart loop with back-off (1 s doubling to --max-backoff-s; back to 1 s after a
// run of a minute): one rank that dies ends its step (--kill-on-bad-exit), and the loop
// starts the instance again, which re-registers with the router under a fresh
// bootstrap epoch. A step that exits 0 (a drained instance) is not restarted.
//
// The workers dial the router at the first node's NodeAddr (scontrol) and
// router.grpc_listen's port, which must therefore be fixed (non-zero). Logs go to
// RUN_DIR (one file per step and rank, appended across restarts), as does the
// router's address file (router.address.json: the bound HTTP and gRPC addresses).
//
// The cluster token (docs/security.md §1): the file named by security.cluster_token_file
// when the config names one (every node reads it there); otherwise
// SlurmClusterTokenFile(), RUN_DIR/cluster_token, which `lockstep plan slurm` writes
// (0600) when it is not there yet and the script names in LOCKSTEP_CLUSTER_TOKEN_FILE
// for every step (unless the job's environment already names a file).
#ifndef LOCKSTEP_DEPLOY_SLURM_SLURM_PLAN_H_
#define LOCKSTEP_DEPLOY_SLURM_SLURM_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::deploy {

struct SlurmPlanOptions {
  std::string config_path;         // as every node sees it (a shared filesystem)
  std::vector<std::string> nodes;  // the job's nodes, in order (--nodes)
  std::string run_dir;             // shared: logs and the router's address file
  std::string lockstep_binary = "lockstep";  // as every node runs it
  int max_backoff_s = 30;
};

// The bash script, or InvalidArgument naming the field or flag that does not fit:
// too few nodes, a router.grpc_listen without a fixed port, a bad node name.
absl::StatusOr<std::string> PlanSlurm(const config::DeploymentConfig& config,
                                      const SlurmPlanOptions& options);

// The token file the plan generates and exports: RUN_DIR/cluster_token, or "" when the
// config names its own (security.cluster_token_file).
std::string SlurmClusterTokenFile(const config::DeploymentConfig& config,
                                  const SlurmPlanOptions& options);

// `word` quoted for bash when it needs it (single quotes).
std::string ShellQuote(const std::string& word);

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_SLURM_SLURM_PLAN_H_
