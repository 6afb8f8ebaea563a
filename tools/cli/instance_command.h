// `lockstep instance`: runs this node's ranks of one instance (all world_size of them
// unless placement.nodes_per_instance > 1) as `lockstep worker` children, the way the
// local launcher does, and supervises them: the failure domain is the instance, so the
// first rank that exits abnormally stops the others and the command exits 1 (kubelet
// or the Slurm restart loop starts the instance again). A stop signal (SIGTERM)
// drains every rank and exits 0 when all exited cleanly. The instance and the first
// rank come from flags, LOCKSTEP_* variables or the pod (runtime/worker/worker_identity.h).
#ifndef LOCKSTEP_TOOLS_CLI_INSTANCE_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_INSTANCE_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunInstanceCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_INSTANCE_COMMAND_H_
