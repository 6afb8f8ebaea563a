// RequireClusterToken: a gRPC service that runs the cluster-token check (token_check.h)
// in front of every handler of another service, where gRPC tells who called: a refused
// call is logged once per caller host with its address (peer_log.h), counted in
// RejectedCalls(), answered UNAUTHENTICATED, and reaches no handler (its request is not
// even parsed), so it changes nothing.
//
//   WorkerServiceImpl service(...);             // implements v1::WorkerService
//   std::unique_ptr<grpc::Service> checked =
//       security::RequireClusterToken<v1::WorkerService>(&service);
//   builder.AddListeningPort(address, security::ServerTransportCredentials(), &port);
//   builder.RegisterService(checked.get());     // not `service` itself
//
// The wrapper replaces the transport-level check of grpc_credentials.h's
// ServerCredentials(), whose callback gRPC 1.51 does not tell the caller's address; a
// server either registers every service through it and listens with
// ServerTransportCredentials(), or listens with ServerCredentials().
//
// Ownership: the wrapper neither owns nor registers `service`; both must outlive the
// server. The token is the one of `security` when the wrapper is made. The request
// reaches server interceptors (none here) as gRPC's raw bytes, not as the message.
// Thread safety: as the wrapped service.
#ifndef LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECKED_SERVICE_H_
#define LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECKED_SERVICE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/service_type.h"
#include "runtime/security/cluster_security.h"

namespace lockstep::security {

// `service` must have exactly the unary or server-streaming methods of `descriptor`, in
// its order (as protoc's generated Service and CallbackService do), either all
// synchronous or all callback ones (a refused callback call ends without any thread
// waiting on it). `open_methods`
// ("/package.Service/Method") need no token.
std::unique_ptr<grpc::Service> RequireClusterToken(
    grpc::Service* service, const google::protobuf::ServiceDescriptor& descriptor,
    const ClusterSecurity& security = ProcessClusterSecurity(),
    std::vector<std::string> open_methods = {});

// The descriptor of a service compiled into this binary, by full name.
const google::protobuf::ServiceDescriptor& GeneratedServiceDescriptor(const char* full_name);

// The same for a service implementing protoc's `Generated` (e.g. v1::WorkerService).
template <class Generated>
std::unique_ptr<grpc::Service> RequireClusterToken(
    grpc::Service* service, const ClusterSecurity& security = ProcessClusterSecurity(),
    std::vector<std::string> open_methods = {}) {
  return RequireClusterToken(service, GeneratedServiceDescriptor(Generated::service_full_name()),
                             security, std::move(open_methods));
}

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_TOKEN_CHECKED_SERVICE_H_
