// The generation side's connections to the context ranks' TCP data planes
// (tcp_wire.h): each peer is named by its KvTransferService address; its data plane
// address is asked once through KvTransferService.DataPlane, and connections whose
// pull ended cleanly are kept for the next pull from that peer. With the cluster's TLS
// files (security::ProcessClusterSecurity) every new connection is TLS: the peer's
// certificate must be signed by the cluster CA and name the data plane's host (or
// LOCKSTEP_TLS_SERVER_NAME), else the connection fails (Unavailable) and no pull is
// sent on it. The token follows, inside TLS.
//
// Thread safety: thread-safe; no network call is made under the lock.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_DATA_CONNECTIONS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_DATA_CONNECTIONS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/security/tls_session.h"
#include "runtime/transfer/raw_pull.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {

class DataConnections {
 public:
  struct Lease {
    TcpSocket socket;
    bool pooled = false;  // an idle connection kept from an earlier pull
  };

  // A connection to the data plane of the peer at `grpc_address` (asked through
  // `stub` while unknown): an idle one, else a new one, by `deadline`. `fresh` asks the
  // peer again and opens a new connection (after an idle one turned out dead: the
  // peer may have been relaunched at the same address).
  // NotFound when the peer has no data plane (pull over gRPC); Unavailable or
  // DeadlineExceeded when it cannot be asked or reached (the address is asked again
  // next time).
  absl::StatusOr<Lease> Take(const std::string& grpc_address, RawPullStub& stub,
                             absl::Time deadline, bool fresh) ABSL_LOCKS_EXCLUDED(mu_);

  // Keeps a connection whose pull ended with its status frame.
  void Return(const std::string& grpc_address, TcpSocket socket) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The client TLS context for the CA in `ca_pem`, made once per CA.
  absl::StatusOr<std::shared_ptr<const security::TlsContext>> ClientTls(const std::string& ca_pem)
      ABSL_LOCKS_EXCLUDED(mu_);

  struct Peer {
    bool known = false;
    std::string data_address;  // empty: none
    std::vector<TcpSocket> idle;
  };

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Peer> peers_ ABSL_GUARDED_BY(mu_);
  std::string tls_ca_pem_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const security::TlsContext> tls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_DATA_CONNECTIONS_H_
