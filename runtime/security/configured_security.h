// The cluster security of a daemon (router, worker, instance, launcher): the files named
// by the deployment config's `security:` block, unless the environment names them
// (docs/security.md §1). Which source wins, per secret:
//
//   cluster token  LOCKSTEP_CLUSTER_TOKEN_FILE when set, else security.cluster_token_file
//   TLS            the LOCKSTEP_TLS_* variables when any of them is set (all four fields
//                  from the environment), else security.tls_{cert,key,ca}_file and
//                  security.tls_server_name (TLS files come as one set)
//
// so a process started with the variables (the launcher's children, a Slurm step, a
// Kubernetes pod) uses what its parent or manifest chose, whatever the shared file says.
//
//   RETURN_IF_ERROR(security::UseConfiguredClusterSecurity(config.security));
//
// Thread safety: thread-safe (the process's ClusterSecurity is).
#ifndef LOCKSTEP_RUNTIME_SECURITY_CONFIGURED_SECURITY_H_
#define LOCKSTEP_RUNTIME_SECURITY_CONFIGURED_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"
#include "runtime/security/cluster_security.h"

namespace lockstep::security {

// The files to use and the name of the field or variable each came from (for errors).
struct ChosenSecurityFiles {
  SecurityFiles files;
  std::string token_source;  // "LOCKSTEP_CLUSTER_TOKEN_FILE" or "security.cluster_token_file"
  bool tls_from_environment = false;

  // The name of a TLS field as it was given: "LOCKSTEP_TLS_CERT_FILE" or
  // "security.tls_cert_file" for `field` "cert" ("key", "ca").
  std::string TlsSource(const std::string& field) const;
};

// The choice above between `environment` (SecurityFilesFromEnvironment()) and
// `configured`. Pure.
ChosenSecurityFiles ChooseSecurityFiles(const SecurityFiles& environment,
                                        const config::SecurityConfig& configured);

// Reads the chosen files. An unreadable or empty file is an error naming its field (or
// variable) and the file; TLS needs all three files.
absl::StatusOr<ClusterSecurity> LoadChosenSecurity(const ChosenSecurityFiles& chosen);

// Chooses, loads and makes the result the process's ClusterSecurity (call at start-up,
// before any gRPC server or channel). Logs where the token came from; without a token it
// logs a warning (internal services then accept anyone) and goes on.
absl::Status UseConfiguredClusterSecurity(const config::SecurityConfig& configured);

// For a local deployment (`lockstep launch`, LocalDeployment): when neither the
// environment nor `configured` names a token file, writes a fresh one to
// `dir`/cluster_token (0600) and names it in LOCKSTEP_CLUSTER_TOKEN_FILE, which the
// deployment's processes inherit (EnsureLocalClusterToken); then
// UseConfiguredClusterSecurity. Returns the token file used. Call before starting
// other threads (setenv).
absl::StatusOr<std::string> EnsureConfiguredClusterToken(const std::string& dir,
                                                         const config::SecurityConfig& configured);

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_CONFIGURED_SECURITY_H_
