// gRPC servers and channels of the cluster's internal services (docs/security.md):
// every server requires the cluster token on every call, and every channel presents
// it; with TLS files both sides also encrypt, and channels check the server's
// certificate against the cluster CA. Replaces grpc::Insecure{Server,Channel}Credentials
// at every creation site:
//
//   // A server whose services are wrapped (token_checked_service.h): the check runs in
//   // front of each handler and a refusal is logged once per caller host.
//   builder.AddListeningPort(address, security::ServerTransportCredentials(), &port);
//   checked_ = security::RequireClusterToken<v1::WorkerService>(&service_);
//   builder.RegisterService(checked_.get());
//
//   // Or: the check in gRPC's transport, for a server that registers services as they
//   // are (the standalone comm::RendezvousServer).
//   builder.AddListeningPort(address, security::ServerCredentials(), &port);
//
//   auto stub = WorkerService::NewStub(security::CreateChannel(address));
//
// Either way a call without the token, or with a wrong one, ends UNAUTHENTICATED before
// any handler runs, so it changes nothing. The transport check (gRPC's auth-metadata
// processor, which also runs on plaintext connections here) is not told the caller's
// address by gRPC 1.51: it logs the first rejection of each method and reason with the
// client's user agent. Without a cluster token, servers accept every call and channels
// present nothing.
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
#include "runtime/security/token_check.h"

namespace lockstep::security {

// Credentials for a server of internal services: token check, TLS when configured.
// `open_methods` ("/package.Service/Method") need no token: the client-facing methods
// of a server that also hosts internal ones (RouterService.Generate, which checks
// the client's API key instead).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
    const ClusterSecurity& security = ProcessClusterSecurity(),
    std::vector<std::string> open_methods = {});

// Credentials for a server whose services all check the token themselves
// (RequireClusterToken, token_checked_service.h): TLS when configured, no token check.
std::shared_ptr<grpc::ServerCredentials> ServerTransportCredentials(
    const ClusterSecurity& security = ProcessClusterSecurity());

// A channel to `target` ("host:port") that presents the token (and speaks TLS).
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const ClusterSecurity& security,
                                             grpc::ChannelArguments args = {});
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             grpc::ChannelArguments args = {});

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_GRPC_CREDENTIALS_H_
