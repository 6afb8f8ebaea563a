// The secrets of a rendered Kubernetes deployment (docs/security.md §1-2): the cluster
// token in a Secret that `lockstep render k8s` writes (secret.yaml); when the config
// names TLS files, a TLS Secret the operator creates (keys tls.crt, tls.key and ca.crt,
// as cert-manager and `kubectl create secret generic --from-file` make it); and the
// router's own files when the config names them, in Secrets the operator creates: its
// HTTPS certificate and key (PREFIX-router-https, keys tls.crt and tls.key, as
// `kubectl create secret tls` makes it) and its client API keys (PREFIX-api-keys, key
// api_keys). Every pod mounts the cluster's secrets, the router pod also its own,
// read-only, mode 0440 (kubelet gives the files the pod's fsGroup, the image's group:
// k8s_render.h), each file by itself (subPath) at the path the config names (the token:
// kDefaultTokenPath when it names none); the cluster's are also named in the LOCKSTEP_*
// variables, which `lockstep probe` (the readiness probe) reads too.
//
// Pure functions of the config; thread-compatible.
#ifndef LOCKSTEP_DEPLOY_K8S_K8S_SECRETS_H_
#define LOCKSTEP_DEPLOY_K8S_K8S_SECRETS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/config/deployment_config.h"

namespace lockstep::deploy {

// Where the token is mounted when security.cluster_token_file is empty.
inline constexpr char kDefaultTokenPath[] = "/var/run/secrets/lockstep/cluster_token";

class K8sSecrets {
 public:
  // `prefix`: the objects' name prefix (the Secrets are PREFIX-cluster-token,
  // PREFIX-tls, PREFIX-router-https and PREFIX-api-keys).
  K8sSecrets(const config::SecurityConfig& security, const config::RouterConfig& router,
             std::string prefix);

  // Problems with the secret files on Kubernetes, each naming its field: paths must
  // be absolute and outside `config_dir` (the ConfigMap's mount); TLS needs
  // tls_server_name (pods are dialled by IP, so their shared certificate is checked
  // against that name).
  std::vector<std::string> Check(const std::string& config_dir) const;

  // The token Secret (named token_secret_name() in `metadata`) holding `token`.
  nlohmann::ordered_json TokenSecret(const std::string& token,
                                     const nlohmann::ordered_json& metadata) const;
  // What every container adds: environment, volume mounts; and every pod: volumes.
  // `router`: the router's pod, which also mounts the router's files.
  std::vector<nlohmann::ordered_json> Env() const;
  std::vector<nlohmann::ordered_json> VolumeMounts(bool router) const;
  std::vector<nlohmann::ordered_json> Volumes(bool router) const;

  std::string token_secret_name() const { return prefix_ + "-cluster-token"; }
  std::string tls_secret_name() const { return prefix_ + "-tls"; }
  std::string router_https_secret_name() const { return prefix_ + "-router-https"; }
  std::string api_keys_secret_name() const { return prefix_ + "-api-keys"; }

 private:
  struct File {
    std::string field;     // "security.tls_cert_file"
    std::string variable;  // "LOCKSTEP_TLS_CERT_FILE"; "" for the router's files
    std::string volume;    // "cluster-token" | "tls" | "router-https" | "api-keys"
    std::string key;       // the key in the Secret
    std::string path;      // where the container sees it
    bool router_only = false;
  };
  struct Volume {
    std::string name;
    std::string secret;
    bool router_only = false;
  };

  const config::SecurityConfig security_;
  const std::string prefix_;
  // The token first, then the TLS files and the router's, when configured.
  std::vector<File> files_;
  std::vector<Volume> volumes_;
};

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_K8S_K8S_SECRETS_H_
