// The context rank's TCP data plane (tcp_wire.h): accepts connections from generation
// ranks and serves the pulls that arrive on them, one after another per connection,
// each through `handler` (KvTransferServer::ServePull) with a sink that writes frames
// straight from the KV slab (the socket write copies the bytes; nothing is held after
// it returns).
//
// A connection that breaks mid-pull, or whose pull was aborted mid-frame, is closed; a
// malformed request is answered with an InvalidArgument status frame and the
// connection is closed. With the cluster's TLS files (security::ProcessClusterSecurity
// at Start) every connection is TLS with this node's certificate, the handshake done
// within 10 s on the connection's thread; one that fails it (a plaintext peer, a
// puller that does not trust the certificate) is closed, logged once per peer host.
//
// Thread safety: thread-safe. One accept thread and one thread per connection (at
// most `max_connections`; more are closed at once). Shutdown wakes and joins them all.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/tls_session.h"
#include "runtime/transfer/chunk_sink.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {

class TcpDataServer {
 public:
  // Serves one pull into `sink` by `deadline`; the outcome goes to the puller.
  using Handler = std::function<absl::Status(const lockstep::v1::PullRequest& request,
                                             absl::Time deadline, ChunkSink& sink)>;

  // Listens on `host` at a free port.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(const std::string& host,
                                                              Handler handler,
                                                              int max_connections = 64);
  ~TcpDataServer();  // Shutdown()
  TcpDataServer(const TcpDataServer&) = delete;
  TcpDataServer& operator=(const TcpDataServer&) = delete;

  // "host:port" bound.
  const std::string& address() const { return address_; }

  // Stops accepting, stops every connection within a poll slice (a pull being written
  // stops and its connection closes) and joins the threads. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Connection {
    TcpSocket socket;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  TcpDataServer(TcpSocket listener, std::string address, Handler handler, int max_connections,
                std::shared_ptr<const security::TlsContext> tls);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void Serve(Connection* connection);
  // Joins the connections that have ended.
  void Reap() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TcpSocket listener_;
  const std::string address_;
  const Handler handler_;
  const int max_connections_;
  const std::shared_ptr<const security::TlsContext> tls_;  // null: plain TCP
  // Pullers must present it first on each connection (tcp_auth.h); empty: no check.
  const std::string cluster_token_ = security::ProcessClusterSecurity().cluster_token;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  absl::Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_
