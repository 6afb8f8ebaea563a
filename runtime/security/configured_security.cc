#include "runtime/security/configured_security.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "runtime/security/secret.h"

namespace lockstep::security {
namespace {

// `status` with `source` (a field or variable) in front of its message.
absl::Status Named(const std::string& source, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(source, ": ", status.message()));
}

}  // namespace

std::string ChosenSecurityFiles::TlsSource(const std::string& field) const {
  return tls_from_environment ? absl::StrCat("LOCKSTEP_TLS_", absl::AsciiStrToUpper(field), "_FILE")
                              : absl::StrCat("security.tls_", field, "_file");
}

ChosenSecurityFiles ChooseSecurityFiles(const SecurityFiles& environment,
                                        const config::SecurityConfig& configured) {
  ChosenSecurityFiles chosen;
  if (!environment.cluster_token_file.empty()) {
    chosen.files.cluster_token_file = environment.cluster_token_file;
    chosen.token_source = "LOCKSTEP_CLUSTER_TOKEN_FILE";
  } else {
    chosen.files.cluster_token_file = configured.cluster_token_file;
    chosen.token_source = "security.cluster_token_file";
  }
  chosen.tls_from_environment = !environment.tls_cert_file.empty() ||
                                !environment.tls_key_file.empty() ||
                                !environment.tls_ca_file.empty() ||
                                !environment.tls_server_name.empty();
  if (chosen.tls_from_environment) {
    chosen.files.tls_cert_file = environment.tls_cert_file;
    chosen.files.tls_key_file = environment.tls_key_file;
    chosen.files.tls_ca_file = environment.tls_ca_file;
    chosen.files.tls_server_name = environment.tls_server_name;
  } else {
    chosen.files.tls_cert_file = configured.tls_cert_file;
    chosen.files.tls_key_file = configured.tls_key_file;
    chosen.files.tls_ca_file = configured.tls_ca_file;
    chosen.files.tls_server_name = configured.tls_server_name;
  }
  return chosen;
}

absl::StatusOr<ClusterSecurity> LoadChosenSecurity(const ChosenSecurityFiles& chosen) {
  const SecurityFiles& files = chosen.files;
  // Each file on its own first, so that an error names the field it came from.
  for (const auto& [source, path] :
       {std::pair{chosen.token_source, files.cluster_token_file},
        std::pair{chosen.TlsSource("cert"), files.tls_cert_file},
        std::pair{chosen.TlsSource("key"), files.tls_key_file},
        std::pair{chosen.TlsSource("ca"), files.tls_ca_file}}) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> read = ReadSecretFile(path); !read.ok()) {
      return Named(source, read.status());
    }
  }
  absl::StatusOr<ClusterSecurity> security = LoadClusterSecurity(files);
  if (!security.ok()) {
    return Named(chosen.tls_from_environment ? "LOCKSTEP_TLS_*" : "security", security.status());
  }
  return security;
}

absl::Status UseConfiguredClusterSecurity(const config::SecurityConfig& configured) {
  const ChosenSecurityFiles chosen = ChooseSecurityFiles(SecurityFilesFromEnvironment(), configured);
  absl::StatusOr<ClusterSecurity> security = LoadChosenSecurity(chosen);
  if (!security.ok()) return security.status();
  if (security->cluster_token.empty()) {
    LOCKSTEP_LOG_WARN("security",
                      "no cluster token (neither LOCKSTEP_CLUSTER_TOKEN_FILE nor "
                      "security.cluster_token_file is set): internal services accept calls from "
                      "anyone who reaches them");
  } else {
    LOCKSTEP_LOG_INFO("security", "cluster token from {} ({}){}", chosen.token_source,
                      chosen.files.cluster_token_file,
                      security->tls() ? absl::StrCat("; TLS from ", chosen.TlsSource("cert"))
                                      : std::string());
  }
  SetProcessClusterSecurity(*std::move(security));
  return absl::OkStatus();
}

absl::StatusOr<std::string> EnsureConfiguredClusterToken(const std::string& dir,
                                                         const config::SecurityConfig& configured) {
  if (SecurityFilesFromEnvironment().cluster_token_file.empty() &&
      configured.cluster_token_file.empty()) {
    if (absl::StatusOr<std::string> written = EnsureLocalClusterToken(dir); !written.ok()) {
      return written.status();
    }
  }
  if (absl::Status status = UseConfiguredClusterSecurity(configured); !status.ok()) return status;
  return ChooseSecurityFiles(SecurityFilesFromEnvironment(), configured).files.cluster_token_file;
}

}  // namespace lockstep::security
