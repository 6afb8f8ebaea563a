// The gRPC RendezvousService (proto/rendezvous.proto): an in-memory key/value map in
// which ranks publish their transport addresses and wait for their peers'. Used to
// bootstrap gloo groups across hosts (RendezvousStore is the client side).
//
// RendezvousServiceImpl is the service, for a process that already runs a gRPC server
// (the router, the launcher); RendezvousServer hosts it alone on its own port.
//
// Wait blocks a server thread with a bounded deadline: the smaller of the request's
// timeout, `max_wait` and the call's deadline; a cancelled call or Shutdown() ends it.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_SERVICE_H_
#define LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/rendezvous.grpc.pb.h"

namespace lockstep::comm {

struct RendezvousServiceOptions {
  // Upper bound of one Wait call, whatever the request asks.
  absl::Duration max_wait = absl::Minutes(5);
  // Limits that keep a bad client from exhausting memory.
  size_t max_key_bytes = 1024;
  size_t max_value_bytes = 1 << 20;
  size_t max_keys = 1 << 20;
};

class RendezvousServiceImpl final : public lockstep::v1::RendezvousService::Service {
 public:
  explicit RendezvousServiceImpl(RendezvousServiceOptions options = {});

  grpc::Status Set(grpc::ServerContext* context, const lockstep::v1::RendezvousSetRequest* request,
                   lockstep::v1::RendezvousSetResponse* response) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Get(grpc::ServerContext* context, const lockstep::v1::RendezvousGetRequest* request,
                   lockstep::v1::RendezvousGetResponse* response) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Wait(grpc::ServerContext* context,
                    const lockstep::v1::RendezvousWaitRequest* request,
                    lockstep::v1::RendezvousWaitResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ends pending waits with UNAVAILABLE and refuses new calls. Call before shutting
  // down the hosting server, so that no handler thread stays blocked.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Number of keys stored, over all key spaces.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // Number of Wait calls received.
  int64_t wait_calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const RendezvousServiceOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // Signalled on every Set and on Shutdown.
  // Key: key_space + '\0' + key.
  absl::flat_hash_map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t wait_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// A RendezvousServiceImpl on its own gRPC server. Stops (ending pending waits) on
// destruction.
class RendezvousServer {
 public:
  // Listens on `address` ("127.0.0.1:0" picks a free port; read it back with port()).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(
      const std::string& address = "127.0.0.1:0", RendezvousServiceOptions options = {});
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;
  ~RendezvousServer();

  int port() const { return port_; }
  // "host:port" to give clients, with the port actually bound.
  const std::string& address() const { return address_; }
  RendezvousServiceImpl& service() { return *service_; }

 private:
  RendezvousServer(std::unique_ptr<RendezvousServiceImpl> service,
                   std::unique_ptr<grpc::Server> server, int port, std::string address);

  std::unique_ptr<RendezvousServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::string address_;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_RENDEZVOUS_SERVICE_H_
