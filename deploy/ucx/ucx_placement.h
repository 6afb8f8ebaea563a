// What a UCX KV transfer (transfer.transport ucx) needs from a multi-node rendering
// (docs/transfer-ucx.md "Transports by config"): the UCX variables in placement.env
// must let ranks on different nodes reach each other, and a Kubernetes pod that is to
// use RDMA must be given an RDMA device. Checked by `lockstep plan slurm` and `lockstep
// render k8s` before they write anything; the local launcher runs on one host and
// needs none of it.
//
// Thread safety: stateless functions.
#ifndef LOCKSTEP_DEPLOY_UCX_UCX_PLACEMENT_H_
#define LOCKSTEP_DEPLOY_UCX_UCX_PLACEMENT_H_

#include <string>
#include <vector>

#include "runtime/config/deployment_config.h"

namespace lockstep::deploy {

struct UcxPlacement {
  // Ranks may run on more than one node (Slurm with several nodes; Kubernetes always:
  // each pod may land on another node).
  bool multi_node = false;
  // The rendering gives devices only through placement.rdma_resources (Kubernetes);
  // Slurm steps see the node's devices.
  bool devices_from_rdma_resources = false;
};

// One line per problem, each naming the field; empty when fine or when no instance
// uses UCX. Problems: UCX_TLS naming only transports within a node (shm, sm, cma,
// posix, sysv, xpmem, knem, self) on a multi-node placement, so every transfer between
// nodes would fail; UCX_TLS naming RDMA transports (rc, dc, ud, ib and their variants)
// where the pods get no RDMA device (no placement.rdma_resources); an empty UCX_TLS or
// UCX_NET_DEVICES. UCX_TLS unset, "all" or an exclusion ("^...") leaves the choice to
// UCX and passes.
std::vector<std::string> CheckUcxPlacement(const config::DeploymentConfig& config,
                                           const UcxPlacement& placement);

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_UCX_UCX_PLACEMENT_H_
