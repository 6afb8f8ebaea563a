// The cluster-token check of internal gRPC calls (docs/security.md §1), shared by the
// two places a server runs it: in front of each handler (token_checked_service.h, which
// knows the caller's address) and in gRPC's transport (grpc_credentials.h's
// ServerCredentials, which does not).
//
// Thread safety: thread-safe (immutable after construction; the counter is atomic).
#ifndef LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECK_H_
#define LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::security {

// The metadata key that carries the cluster token.
inline constexpr char kClusterTokenMetadataKey[] = "x-lockstep-cluster-token";

class TokenCheck {
 public:
  // An empty `token` lets every call through (a process without a cluster token).
  // `open_methods` ("/package.Service/Method") need no token.
  TokenCheck(std::string token, std::vector<std::string> open_methods);

  // Null when a call of `method` that presented `presented` (nullopt: no token) may go
  // on. Otherwise why it is refused, "no cluster token" or "wrong cluster token", and
  // the refusal is counted in RejectedCalls(). The comparison is constant-time.
  const char* Refusal(std::string_view method, std::optional<std::string_view> presented) const;

 private:
  const std::string token_;
  const std::vector<std::string> open_methods_;
};

// Calls refused for a missing or wrong token by this process's gRPC servers, since start.
int64_t RejectedCalls();

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECK_H_
