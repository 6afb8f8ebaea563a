// The secrets of a rendered Kubernetes deployment (docs/security.md §1-2): the cluster
// token in a Secret that `lockstep render k8s` writes (secret.yaml), and, when the
// config names TLS files, a TLS Secret the operator creates (keys tls.crt, tls.key and
// ca.crt, as cert-manager and `kubectl create secret generic --from-file` make it).
// Every pod (router and instances) mounts them read-only, each file by itself
// (subPath) at the path the config names (the token: kDefaultTokenPath when it names
// none), and finds them through the LOCKSTEP_* variables, which `lockstep probe` (the
// readiness probe) reads too.
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
  // `prefix`: the objects' name prefix (the Secrets are PREFIX-cluster-token and
  // PREFIX-tls).
  K8sSecrets(const config::SecurityConfig& security, std::string prefix);

  // Problems with the security block on Kubernetes, each naming its field: paths must
  // be absolute and outside `config_dir` (the ConfigMap's mount); TLS needs
  // tls_server_name (pods are dialled by IP, so their shared certificate is checked
  // against that name).
  std::vector<std::string> Check(const std::string& config_dir) const;

  // The token Secret (named token_secret_name() in `metadata`) holding `token`.
  nlohmann::ordered_json TokenSecret(const std::string& token,
                                     const nlohmann::ordered_json& metadata) const;
  // What every container adds: environment, volume mounts; and every pod: volumes.
  std::vector<nlohmann::ordered_json> Env() const;
  std::vector<nlohmann::ordered_json> VolumeMounts() const;
  std::vector<nlohmann::ordered_json> Volumes() const;

  std::string token_secret_name() const { return prefix_ + "-cluster-token"; }
  std::string tls_secret_name() const { return prefix_ + "-tls"; }

 private:
  struct File {
    std::string field;     // "security.tls_cert_file"
    std::string variable;  // "LOCKSTEP_TLS_CERT_FILE"
    std::string volume;    // "cluster-token" | "tls"
    std::string key;       // the key in the Secret
    std::string path;      // where the container sees it
  };

  const config::SecurityConfig security_;
  const std::string prefix_;
  std::vector<File> files_;  // the token first, then the TLS files when configured
};

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_K8S_K8S_SECRETS_H_
