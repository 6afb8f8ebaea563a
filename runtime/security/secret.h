// Secrets as bytes: the cluster token and API keys. Reading them from files, making
// new ones, and comparing them without leaking where they differ.
//
//   ASSIGN_OR_RETURN(std::string token, ReadSecretFile("/run/secrets/cluster_token"));
//   if (!ConstantTimeEquals(presented, token)) return Unauthenticated(...);
//
// Thread safety: free functions, thread-safe.
#ifndef LOCKSTEP_RUNTIME_SECURITY_SECRET_H_
#define LOCKSTEP_RUNTIME_SECURITY_SECRET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::security {

// True when `presented` (what a caller sent) equals `secret`. The time taken depends
// only on the length of `presented`: never on the secret's length, its bytes, or where
// the two first differ. (The secret's bytes past `presented`'s length are never read.)
bool ConstantTimeEquals(std::string_view presented, std::string_view secret);

// The contents of `path` without trailing whitespace (a final newline is common).
// Errors: NotFound / PermissionDenied naming the file; InvalidArgument when it is empty.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// The non-empty, non-comment ('#') lines of `path`, each trimmed: a list of API keys.
// InvalidArgument when there is none.
absl::StatusOr<std::vector<std::string>> ReadSecretLines(const std::string& path);

// A new random token: 64 hex characters (256 bits from the kernel's CSPRNG).
absl::StatusOr<std::string> GenerateToken();

// Writes `secret` and a newline to `path`, readable by its owner only (0600), replacing
// any file there.
absl::Status WriteSecretFile(const std::string& path, std::string_view secret);

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_SECRET_H_
