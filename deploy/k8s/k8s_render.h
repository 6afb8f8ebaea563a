// `lockstep render k8s`: Kubernetes manifests for a deployment (deploy/k8s/README.md).
// A pure function of the config; the examples under deploy/k8s/examples/ are its
// output, checked in and golden-tested.
//
//   configmap.yaml        the deployment YAML itself, mounted at /etc/lockstep
//   secret.yaml           the cluster token, a Secret every pod mounts (k8s_secrets.h;
//                         with TLS files in the config, pods also mount PREFIX-tls; with
//                         router.https_cert_file / api_keys_file, the router pod mounts
//                         PREFIX-router-https / PREFIX-api-keys)
//   router.yaml           the router: a Deployment and a Service (HTTP and gRPC ports
//                         from router.http_listen / router.grpc_listen, fixed)
//   <pool>.yaml           per role (ctx, gen, agg): with placement.nodes_per_instance 1,
//                         a headless Service and a StatefulSet, one pod per instance
//                         running `lockstep instance` (all its ranks); otherwise a
//                         LeaderWorkerSet, one group of nodes_per_instance pods per
//                         instance, recreated as a whole when one pod restarts
//   compute-domain.yaml   with placement.compute_domain: a ComputeDomain whose channel
//                         every worker pod claims
//
// A pod learns its instance from LOCKSTEP_ROLE and its ordinal (the pod name, or the
// LWS group index), its first rank from LWS_WORKER_INDEX, its address from
// status.podIP, and finds the router at <name>-router:<grpc port>
// (runtime/worker/worker_identity.h). Each pod asks for placement.gpus_per_node GPUs
// and mounts a memory-backed /dev/shm. The leader's WorkerService listens on
// kLeaderPort; its readiness probe is `lockstep probe`.
//
// Every pod runs as the image's user (kImageUid:kImageGid, runAsNonRoot) with fsGroup
// kImageGid: kubelet gives that group the mounted Secrets' files, which are mounted 0440
// (owner root, group-readable), so the daemons can read their token, keys and
// certificates and no other user can.
#ifndef LOCKSTEP_DEPLOY_K8S_K8S_RENDER_H_
#define LOCKSTEP_DEPLOY_K8S_K8S_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::deploy {

inline constexpr int kLeaderPort = 8700;
// The user and group deploy/docker/Dockerfile runs as (its USER line; the tests read it
// and check the rendered pods against it).
inline constexpr int64_t kImageUid = 10001;
inline constexpr int64_t kImageGid = 10001;

struct K8sRenderOptions {
  std::string image;          // the container image (deploy/docker/Dockerfile); required
  std::string name = "lockstep";  // prefix of every object's name; a DNS label
  std::string config_text;    // the deployment YAML as written, for the ConfigMap
  std::string source;         // how the header comment names the config file
  std::string cluster_token;  // what the token Secret holds; required
};

struct RenderedFile {
  std::string name;  // "router.yaml"
  std::string text;  // one or more YAML documents
};

// The files in a fixed order, or InvalidArgument naming the field or flag that does
// not fit: a router port of 0, a relative model, security or router secret path (it is
// read inside the container), instances of one pool with different world sizes, TLS without
// security.tls_server_name, no --image, no token.
// `config` must come from the config text parsed with no base directory, so that
// model paths are as written.
absl::StatusOr<std::vector<RenderedFile>> RenderK8s(const config::DeploymentConfig& config,
                                                    const K8sRenderOptions& options);

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_K8S_K8S_RENDER_H_
