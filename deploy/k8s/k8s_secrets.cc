#include "deploy/k8s/k8s_secrets.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::deploy {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kTokenKey[] = "token";
constexpr char kApiKeysKey[] = "api_keys";
// Owner root, readable by the group that fsGroup gives the files (the pod's user's).
constexpr int kOwnerAndGroupRead = 0440;

}  // namespace

K8sSecrets::K8sSecrets(const config::SecurityConfig& security, const config::RouterConfig& router,
                       std::string prefix)
    : security_(security), prefix_(std::move(prefix)) {
  files_.push_back({"security.cluster_token_file", "LOCKSTEP_CLUSTER_TOKEN_FILE", "cluster-token",
                    kTokenKey,
                    security.cluster_token_file.empty() ? kDefaultTokenPath
                                                        : security.cluster_token_file});
  volumes_.push_back({"cluster-token", token_secret_name()});
  if (!security.tls_cert_file.empty()) {
    files_.push_back({"security.tls_cert_file", "LOCKSTEP_TLS_CERT_FILE", "tls", "tls.crt",
                      security.tls_cert_file});
    files_.push_back({"security.tls_key_file", "LOCKSTEP_TLS_KEY_FILE", "tls", "tls.key",
                      security.tls_key_file});
    files_.push_back({"security.tls_ca_file", "LOCKSTEP_TLS_CA_FILE", "tls", "ca.crt",
                      security.tls_ca_file});
    volumes_.push_back({"tls", tls_secret_name()});
  }
  // The router's: named by its config fields, read by the router alone.
  if (!router.https_cert_file.empty()) {
    files_.push_back({"router.https_cert_file", "", "router-https", "tls.crt",
                      router.https_cert_file, /*router_only=*/true});
    files_.push_back({"router.https_key_file", "", "router-https", "tls.key", router.https_key_file,
                      /*router_only=*/true});
    volumes_.push_back({"router-https", router_https_secret_name(), /*router_only=*/true});
  }
  if (!router.api_keys_file.empty()) {
    files_.push_back({"router.api_keys_file", "", "api-keys", kApiKeysKey, router.api_keys_file,
                      /*router_only=*/true});
    volumes_.push_back({"api-keys", api_keys_secret_name(), /*router_only=*/true});
  }
}

std::vector<std::string> K8sSecrets::Check(const std::string& config_dir) const {
  std::vector<std::string> errors;
  for (const File& file : files_) {
    if (file.path[0] != '/') {
      errors.push_back(absl::StrCat(file.field, ": must be an absolute path (as the containers "
                                    "see it), got '", file.path, "'"));
    } else if (file.path.rfind(config_dir + "/", 0) == 0) {
      errors.push_back(absl::StrCat(file.field, ": must be outside ", config_dir,
                                    " (the config's mount), got '", file.path, "'"));
    }
  }
  if (!security_.tls_cert_file.empty() && security_.tls_server_name.empty()) {
    errors.push_back(
        "security.tls_server_name: is required with TLS on Kubernetes: pods are dialled by IP, "
        "so the certificate they share is checked against this name");
  }
  return errors;
}

Json K8sSecrets::TokenSecret(const std::string& token, const Json& metadata) const {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", metadata},
          {"type", "Opaque"},
          {"stringData", {{kTokenKey, token}}}};
}

std::vector<Json> K8sSecrets::Env() const {
  std::vector<Json> env;
  for (const File& file : files_) {
    if (!file.variable.empty()) env.push_back({{"name", file.variable}, {"value", file.path}});
  }
  if (!security_.tls_server_name.empty()) {
    env.push_back({{"name", "LOCKSTEP_TLS_SERVER_NAME"}, {"value", security_.tls_server_name}});
  }
  return env;
}

std::vector<Json> K8sSecrets::VolumeMounts(bool router) const {
  std::vector<Json> mounts;
  for (const File& file : files_) {
    if (file.router_only && !router) continue;
    mounts.push_back({{"name", file.volume},
                      {"mountPath", file.path},
                      {"subPath", file.key},
                      {"readOnly", true}});
  }
  return mounts;
}

std::vector<Json> K8sSecrets::Volumes(bool router) const {
  std::vector<Json> volumes;
  for (const Volume& volume : volumes_) {
    if (volume.router_only && !router) continue;
    volumes.push_back(
        {{"name", volume.name},
         {"secret", {{"secretName", volume.secret}, {"defaultMode", kOwnerAndGroupRead}}}});
  }
  return volumes;
}

}  // namespace lockstep::deploy
