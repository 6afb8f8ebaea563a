// Who a rank is on a cluster: its instance, rank, world size and local device, each
// taken from the first source that has it (docs: deploy/slurm/README.md,
// deploy/k8s/README.md):
//
//   item          flag            LOCKSTEP_*             scheduler
//   instance      --instance      LOCKSTEP_INSTANCE      pod: the LOCKSTEP_INSTANCE_INDEX-th (else
//                                                        the pod name's ordinal) instance of
//                                                        role LOCKSTEP_ROLE
//   rank          --rank          LOCKSTEP_RANK          SLURM_PROCID; 0 when world_size is 1
//   world size    --world-size    LOCKSTEP_WORLD_SIZE    the instance's world_size in the file
//   local device  --device        LOCKSTEP_DEVICE        SLURM_LOCALID; else rank % ranks per node
//   first rank    --start-rank    LOCKSTEP_START_RANK    LWS_WORKER_INDEX * ranks per node; else 0
//   of a node (`lockstep instance`)
//
// The pod name (POD_NAME, else HOSTNAME) ends in the StatefulSet ordinal ("gen-3"); a
// LeaderWorkerSet pod is "<set>-<group>" (leader) or "<set>-<group>-<worker>", and its
// group is the instance's ordinal. Pure functions over an injected environment.
#ifndef LOCKSTEP_RUNTIME_WORKER_WORKER_IDENTITY_H_
#define LOCKSTEP_RUNTIME_WORKER_WORKER_IDENTITY_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::worker {

// Looks up an environment variable; nullopt when unset.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
// The process's own environment (getenv).
Environment ProcessEnvironment();

// The values given on the command line; unset: look further.
struct IdentityFlags {
  std::string instance;
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> device;
};

struct WorkerIdentity {
  const config::InstanceConfig* instance = nullptr;  // in the config it was resolved in
  int rank = 0;
  int world_size = 1;
  int local_device = 0;
  std::string rank_source;  // "--rank", "LOCKSTEP_RANK", "SLURM_PROCID", ...
};

// The instance this process belongs to (see the table above).
absl::StatusOr<const config::InstanceConfig*> ResolveInstance(
    const std::string& flag, const config::DeploymentConfig& config, const Environment& env);

// Every item of a worker's identity. Errors name the source of a bad value.
absl::StatusOr<WorkerIdentity> ResolveWorkerIdentity(const IdentityFlags& flags,
                                                     const config::DeploymentConfig& config,
                                                     const Environment& env);

// The ranks of `instance` on one node: world_size / placement.nodes_per_instance.
int RanksPerNode(const config::InstanceConfig& instance, const config::PlacementConfig& placement);

// The first rank this node runs (`lockstep instance`): a multiple of RanksPerNode.
absl::StatusOr<int> ResolveStartRank(std::optional<int> flag,
                                     const config::InstanceConfig& instance,
                                     const config::PlacementConfig& placement,
                                     const Environment& env);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WORKER_IDENTITY_H_
