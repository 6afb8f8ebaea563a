// gRPC servers and channels of the cluster's internal services (docs/security.md):
// every server requires the cluster token on every call, and every channel presents
// it; with TLS files both sides also encrypt, and channels check the server's
// certificate against the cluster CA. Replaces grpc::Insecure{Server,Channel}Credentials
// at every creation site:
//
//   builder.AddListeningPort(address, security::ServerCredentials(), &port);
//   auto stub = WorkerService::NewStub(security::CreateChannel(address));
//
// A call without the token, or with a wrong one, ends UNAUTHENTICATED before any
// handler runs (gRPC's auth-metadata processor, which also runs on plaintext
// connections here), so it changes nothing; the first rejection of each method and
// reason is logged (gRPC does not tell the processor the peer's address; the log
// names the method and the client's user agent). Without a cluster token, servers
// accept every call and channels present nothing.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
#define LOCKSTEP_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/security/cluster_security.h"

namespace lockstep::security {

// The metadata key that carries the cluster token.
inline constexpr char kClusterTokenMetadataKey[] = "x-lockstep-cluster-token";

// Credentials for a server of internal services: token check, TLS when configured.
// `open_methods` ("/package.Service/Method") need no token: the client-facing methods
// of a server that also hosts internal ones (RouterService.Generate, which checks
// the client's API key instead).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const ClusterSecurity& security = ProcessClusterSecurity(),
    std::vector<std::string> open_methods = {});

// A channel to `target` ("host:port") that presents the token (and speaks TLS).
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const ClusterSecurity& security,
                                             grpc::ChannelArguments args = {});
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             grpc::ChannelArguments args = {});

// Calls rejected for a missing or wrong token by this process's servers, since start.
int64_t RejectedCalls();

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
