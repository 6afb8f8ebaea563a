// What the processes of one deployment share to trust each other (docs/security.md):
// the cluster token that every internal gRPC call and data-plane connection presents,
// and optionally TLS files (this node's certificate and key, and the cluster CA that
// signed every node's certificate).
//
// Every gRPC server and channel of a process belongs to the same cluster, so the
// process holds one ClusterSecurity: the daemons set it at start-up (from the config,
// else the environment), and every server and channel creation site reads it through
// grpc_credentials.h. A process that never sets it reads the environment on first use:
//
//   LOCKSTEP_CLUSTER_TOKEN_FILE  file holding the token (no token: nothing is required)
//   LOCKSTEP_TLS_CERT_FILE, LOCKSTEP_TLS_KEY_FILE, LOCKSTEP_TLS_CA_FILE   (PEM)
//   LOCKSTEP_TLS_SERVER_NAME     name expected in servers' certificates (optional)
//
// Thread safety: thread-safe. Servers and channels capture the value current when they
// are created; a later SetProcessClusterSecurity changes only later ones.
#ifndef LOCKSTEP_RUNTIME_SECURITY_CLUSTER_SECURITY_H_
#define LOCKSTEP_RUNTIME_SECURITY_CLUSTER_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::security {

// Where the secrets live (file names, as in the config or the environment).
struct SecurityFiles {
  std::string cluster_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  // Name servers' certificates are checked against; empty: the host of each address.
  std::string tls_server_name;
};

// The loaded secrets. Plain value type.
struct ClusterSecurity {
  // Empty: calls need no token (a warning is logged once per process).
  std::string cluster_token;
  // PEM contents; TLS is on when all three are set.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_ca_pem;
  std::string tls_server_name;

  bool tls() const { return !tls_cert_pem.empty(); }
};

// Reads the files named in `files` (empty names are skipped). TLS needs all three of
// cert, key and CA, else InvalidArgument; an unreadable file is an error naming it.
absl::StatusOr<ClusterSecurity> LoadClusterSecurity(const SecurityFiles& files);

// The file names from the LOCKSTEP_* variables above (unset: empty).
SecurityFiles SecurityFilesFromEnvironment();

// The process's ClusterSecurity: the last one set, else loaded from the environment on
// first use (a file that cannot be read there is fatal: the process would otherwise
// serve without the protection its operator asked for).
ClusterSecurity ProcessClusterSecurity();
void SetProcessClusterSecurity(ClusterSecurity security);

// For a local deployment (`lockstep launch`): when the environment names no token
// file, writes a new token to `dir`/cluster_token (0600) and names it in this process's
// environment, which the deployment's processes inherit. Then loads the environment's
// files as the process's ClusterSecurity (the launcher's own calls present the token).
// Returns the token file's path. Call before starting other threads (setenv).
absl::StatusOr<std::string> EnsureLocalClusterToken(const std::string& dir);

// Sets the process's ClusterSecurity for its lifetime and restores the previous one
// (tests that run several "processes" in one).
class ScopedClusterSecurity {
 public:
  explicit ScopedClusterSecurity(ClusterSecurity security);
  ~ScopedClusterSecurity();
  ScopedClusterSecurity(const ScopedClusterSecurity&) = delete;
  ScopedClusterSecurity& operator=(const ScopedClusterSecurity&) = delete;

 private:
  ClusterSecurity previous_;
};

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_CLUSTER_SECURITY_H_
