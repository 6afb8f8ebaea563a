#include "runtime/transfer/data_connections.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "runtime/security/cluster_security.h"
#include "runtime/transfer/tcp_auth.h"

namespace lockstep::transfer {
namespace {

// Idle connections kept per peer (one per receive thread is enough).
constexpr size_t kMaxIdlePerPeer = 8;
// Bound on asking for, and connecting to, a data plane.
constexpr absl::Duration kSetUpTimeout = absl::Seconds(5);

}  // namespace

absl::StatusOr<DataConnections::Lease> DataConnections::Take(const std::string& grpc_address,
                                                             RawPullStub& stub, absl::Time deadline,
                                                             bool fresh) {
  std::string data_address;
  {
    absl::MutexLock lock(&mu_);
    Peer& peer = peers_[grpc_address];
    if (peer.known && !fresh) {
      if (peer.data_address.empty()) {
        return absl::NotFoundError(absl::StrCat(grpc_address, " has no TCP data plane"));
      }
      if (!peer.idle.empty()) {
        Lease lease{std::move(peer.idle.back()), /*pooled=*/true};
        peer.idle.pop_back();
        return lease;
      }
      data_address = peer.data_address;
    }
  }
  const absl::Time set_up = std::min(deadline, absl::Now() + kSetUpTimeout);
  if (data_address.empty()) {
    absl::StatusOr<std::string> asked = stub.DataPlaneAddress(set_up);
    if (!asked.ok()) {
      return absl::Status(asked.status().code(),
                          absl::StrCat("cannot ask ", grpc_address,
                                       " for its data plane: ", asked.status().message()));
    }
    absl::MutexLock lock(&mu_);
    Peer& peer = peers_[grpc_address];
    if (peer.data_address != *asked) peer.idle.clear();  // connections to an old process
    peer.known = true;
    peer.data_address = *asked;
    if (asked->empty()) {
      return absl::NotFoundError(absl::StrCat(grpc_address, " has no TCP data plane"));
    }
    data_address = *asked;
  }
  absl::StatusOr<TcpSocket> connected = ConnectTcp(data_address, set_up);
  if (!connected.ok()) {
    absl::MutexLock lock(&mu_);
    peers_.erase(grpc_address);  // ask again: the peer may have moved
    return connected.status();
  }
  const security::ClusterSecurity security = security::ProcessClusterSecurity();
  if (security.tls()) {
    absl::StatusOr<std::shared_ptr<const security::TlsContext>> tls = ClientTls(security.tls_ca_pem);
    if (!tls.ok()) return tls.status();
    const std::string host = !security.tls_server_name.empty()
                                 ? security.tls_server_name
                                 : ParseHostPort(data_address).value_or(HostPort{}).host;
    if (absl::Status s = StartTlsClient(*connected, **tls, host, set_up); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("data plane ", data_address, ": ", s.message()));
    }
  }
  if (absl::Status sent = SendTcpToken(*connected, security.cluster_token, set_up); !sent.ok()) {
    return sent;
  }
  return Lease{std::move(*connected), /*pooled=*/false};
}

absl::StatusOr<std::shared_ptr<const security::TlsContext>> DataConnections::ClientTls(
    const std::string& ca_pem) {
  {
    absl::MutexLock lock(&mu_);
    if (tls_ != nullptr && tls_ca_pem_ == ca_pem) return tls_;
  }
  absl::StatusOr<std::shared_ptr<const security::TlsContext>> made =
      security::TlsContext::ForClient(ca_pem);
  if (!made.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane TLS (LOCKSTEP_TLS_CA_FILE): ", made.status().message()));
  }
  absl::MutexLock lock(&mu_);
  tls_ca_pem_ = ca_pem;
  tls_ = *made;
  return *std::move(made);
}

void DataConnections::Return(const std::string& grpc_address, TcpSocket socket) {
  absl::MutexLock lock(&mu_);
  Peer& peer = peers_[grpc_address];
  if (peer.known && peer.idle.size() < kMaxIdlePerPeer) peer.idle.push_back(std::move(socket));
}

}  // namespace lockstep::transfer
