// Certificates made at test time with the openssl CLI (Debian's `openssl` package): a
// cluster CA and a node certificate it signed, valid for 127.0.0.1 and localhost.
//
//   ASSIGN_OR_RETURN(TestCerts certs, MakeTestCerts(testing::TempDir()));
//   ScopedClusterSecurity scoped(certs.Security("token"));
//
// Thread safety: functions; each call writes its own directory.
#ifndef LOCKSTEP_RUNTIME_SECURITY_TESTING_TEST_CERTS_H_
#define LOCKSTEP_RUNTIME_SECURITY_TESTING_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/security/cluster_security.h"

namespace lockstep::security {

struct TestCerts {
  std::string dir;
  std::string ca_file;    // the cluster CA (PEM)
  std::string cert_file;  // a node certificate signed by it
  std::string key_file;   // its key
  // A second CA and certificate, unrelated to the first (a stranger's).
  std::string other_ca_file;
  std::string other_cert_file;
  std::string other_key_file;

  SecurityFiles Files() const;
  // The loaded cluster security with TLS and `token` (dies on a read error).
  ClusterSecurity Security(const std::string& token) const;
};

// Creates `dir`/certs-N (N unique per call in this process) with the files above.
absl::StatusOr<TestCerts> MakeTestCerts(const std::string& dir);

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_TESTING_TEST_CERTS_H_
