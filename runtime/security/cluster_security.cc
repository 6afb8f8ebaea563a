#include "runtime/security/cluster_security.h"

#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "runtime/security/secret.h"

namespace lockstep::security {
namespace {

absl::Status ReadPem(const std::string& path, std::string* pem) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> contents = ReadSecretFile(path);
  if (!contents.ok()) return contents.status();
  *pem = *std::move(contents) + "\n";
  return absl::OkStatus();
}

std::string EnvOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

absl::Mutex process_mu(absl::kConstInit);
std::optional<ClusterSecurity>* process_security ABSL_GUARDED_BY(process_mu) = nullptr;

}  // namespace

absl::StatusOr<ClusterSecurity> LoadClusterSecurity(const SecurityFiles& files) {
  ClusterSecurity security;
  if (!files.cluster_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile(files.cluster_token_file);
    if (!token.ok()) return token.status();
    security.cluster_token = *std::move(token);
  }
  const int tls_files = !files.tls_cert_file.empty() + !files.tls_key_file.empty() +
                        !files.tls_ca_file.empty();
  if (tls_files != 0 && tls_files != 3) {
    return absl::InvalidArgumentError(
        "TLS needs a certificate, its key and the cluster CA; got only some of them");
  }
  if (absl::Status s = ReadPem(files.tls_cert_file, &security.tls_cert_pem); !s.ok()) return s;
  if (absl::Status s = ReadPem(files.tls_key_file, &security.tls_key_pem); !s.ok()) return s;
  if (absl::Status s = ReadPem(files.tls_ca_file, &security.tls_ca_pem); !s.ok()) return s;
  security.tls_server_name = files.tls_server_name;
  return security;
}

SecurityFiles SecurityFilesFromEnvironment() {
  return SecurityFiles{
      .cluster_token_file = EnvOrEmpty("LOCKSTEP_CLUSTER_TOKEN_FILE"),
      .tls_cert_file = EnvOrEmpty("LOCKSTEP_TLS_CERT_FILE"),
      .tls_key_file = EnvOrEmpty("LOCKSTEP_TLS_KEY_FILE"),
      .tls_ca_file = EnvOrEmpty("LOCKSTEP_TLS_CA_FILE"),
      .tls_server_name = EnvOrEmpty("LOCKSTEP_TLS_SERVER_NAME"),
  };
}

ClusterSecurity ProcessClusterSecurity() {
  absl::MutexLock lock(&process_mu);
  if (process_security == nullptr) process_security = new std::optional<ClusterSecurity>();
  if (!process_security->has_value()) {
    absl::StatusOr<ClusterSecurity> loaded = LoadClusterSecurity(SecurityFilesFromEnvironment());
    if (!loaded.ok()) {
      LOCKSTEP_LOG_CRITICAL("security", "cluster security from the environment: {}",
                            loaded.status().ToString());
      std::abort();
    }
    if (loaded->cluster_token.empty()) {
      LOCKSTEP_LOG_WARN("security",
                        "no cluster token (LOCKSTEP_CLUSTER_TOKEN_FILE unset): internal "
                        "services accept calls from anyone who reaches them");
    }
    *process_security = *std::move(loaded);
  }
  return **process_security;
}

void SetProcessClusterSecurity(ClusterSecurity security) {
  absl::MutexLock lock(&process_mu);
  if (process_security == nullptr) process_security = new std::optional<ClusterSecurity>();
  *process_security = std::move(security);
}

absl::StatusOr<std::string> EnsureLocalClusterToken(const std::string& dir) {
  SecurityFiles files = SecurityFilesFromEnvironment();
  if (files.cluster_token_file.empty()) {
    absl::StatusOr<std::string> token = GenerateToken();
    if (!token.ok()) return token.status();
    files.cluster_token_file = dir + "/cluster_token";
    if (absl::Status s = WriteSecretFile(files.cluster_token_file, *token); !s.ok()) return s;
    if (setenv("LOCKSTEP_CLUSTER_TOKEN_FILE", files.cluster_token_file.c_str(), 1) != 0) {
      return absl::InternalError("setenv LOCKSTEP_CLUSTER_TOKEN_FILE failed");
    }
  }
  absl::StatusOr<ClusterSecurity> security = LoadClusterSecurity(files);
  if (!security.ok()) return security.status();
  SetProcessClusterSecurity(*std::move(security));
  return files.cluster_token_file;
}

ScopedClusterSecurity::ScopedClusterSecurity(ClusterSecurity security)
    : previous_(ProcessClusterSecurity()) {
  SetProcessClusterSecurity(std::move(security));
}

ScopedClusterSecurity::~ScopedClusterSecurity() { SetProcessClusterSecurity(std::move(previous_)); }

}  // namespace lockstep::security
