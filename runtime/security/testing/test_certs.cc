#include "runtime/security/testing/test_certs.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::security {
namespace {

absl::Status Run(const std::string& command) {
  const std::string quiet = absl::StrCat(command, " >/dev/null 2>&1");
  if (std::system(quiet.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed (is openssl installed?): ", command));
  }
  return absl::OkStatus();
}

// A CA in `prefix`-ca.{pem,key} and a node certificate it signed in `prefix`.{pem,key}.
absl::Status MakePair(const std::string& dir, const std::string& prefix) {
  const std::string p = absl::StrCat(dir, "/", prefix);
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (absl::Status s = Run(absl::StrCat("openssl req -x509 ", ec, " -keyout ", p, "-ca.key -out ",
                                        p, "-ca.pem -days 2 -subj /CN=", prefix, "-ca"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Run(absl::StrCat("openssl req ", ec, " -keyout ", p, ".key -out ", p,
                                        ".csr -subj /CN=localhost"));
      !s.ok()) {
    return s;
  }
  {
    std::ofstream ext(p + ".ext");
    ext << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    if (!ext) return absl::InternalError(absl::StrCat("cannot write ", p, ".ext"));
  }
  return Run(absl::StrCat("openssl x509 -req -in ", p, ".csr -CA ", p, "-ca.pem -CAkey ", p,
                          "-ca.key -CAcreateserial -out ", p, ".pem -days 2 -extfile ", p,
                          ".ext"));
}

}  // namespace

SecurityFiles TestCerts::Files() const {
  return SecurityFiles{.tls_cert_file = cert_file, .tls_key_file = key_file, .tls_ca_file = ca_file};
}

ClusterSecurity TestCerts::Security(const std::string& token) const {
  absl::StatusOr<ClusterSecurity> security = LoadClusterSecurity(Files());
  if (!security.ok()) std::abort();
  security->cluster_token = token;
  return *std::move(security);
}

absl::StatusOr<TestCerts> MakeTestCerts(const std::string& dir) {
  static std::atomic<int> next{0};
  TestCerts certs;
  certs.dir = absl::StrCat(dir, "/certs-", next.fetch_add(1));
  if (mkdir(certs.dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", certs.dir));
  }
  if (absl::Status s = MakePair(certs.dir, "node"); !s.ok()) return s;
  if (absl::Status s = MakePair(certs.dir, "other"); !s.ok()) return s;
  certs.ca_file = certs.dir + "/node-ca.pem";
  certs.cert_file = certs.dir + "/node.pem";
  certs.key_file = certs.dir + "/node.key";
  certs.other_ca_file = certs.dir + "/other-ca.pem";
  certs.other_cert_file = certs.dir + "/other.pem";
  certs.other_key_file = certs.dir + "/other.key";
  return certs;
}

}  // namespace lockstep::security
