// The context rank's TCP data plane (tcp_wire.h): accepts connections from generation
// ranks and serves the pulls that arrive on them, one after another per connection,
// each through `handler` (KvTransferServer::ServePull) with a sink that writes frames
// straight from the KV slab (the socket write copies the bytes; nothing is held after
// it returns).
//
// A connection that breaks mid-pull, or whose pull was aborted mid-frame, is closed; a
// malformed request is answered with an InvalidArgument status frame and the
// connection is closed. With the cluster's TLS files (security::ProcessClusterSecurity
// at Start) every connection is TLS with this node's certificate; one that fails the
// handshake (a plaintext peer, a puller that does not trust the certificate) is closed,
// logged once per peer host.
//
// Admission: a new connection is in its handshake until, within `auth_timeout` of the
// accept, it has done TLS (with TLS files) and sent its first frame (the cluster token,
// or without a token its first request); one that has not is closed. At most
// `max_unauthenticated` connections are in the handshake at once: a newer one evicts the
// oldest (a puller finishes its handshake within milliseconds; an idle or slow-drip peer
// would hold its slot until its deadline), so idle connections cannot lock pullers out.
// Only a connection past the handshake counts against `max_connections`; beyond it, the
// connection is closed unserved and the puller pulls over gRPC instead (receive_workers.h).
// An ended connection's socket is closed at once; its thread is joined by the next
// connection to end, the next accept, or Shutdown.
//
// Thread safety: thread-safe. One accept thread and one thread per connection: at most
// max_connections serving + max_unauthenticated in the handshake + max_unauthenticated
// evicted and ending; more connections are closed at once. Shutdown wakes and joins
// them all.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
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

struct TcpDataServerOptions {
  // Connections past the handshake served at once (one thread each). A generation rank
  // opens at most one per receive thread (GrpcTransceiverOptions::max_concurrent_receives,
  // 4 by default), so 512 serves 128 generation ranks; a puller beyond it is refused and
  // pulls over gRPC.
  int max_connections = 512;
  // Connections in the handshake at once (see above); a newer one evicts the oldest.
  int max_unauthenticated = 64;
  // The handshake (TLS, then the token or the first request) must end within this of
  // the accept.
  absl::Duration auth_timeout = absl::Seconds(10);

  absl::Status Validate() const;
};

class TcpDataServer {
 public:
  // Serves one pull into `sink` by `deadline`; the outcome goes to the puller.
  using Handler = std::function<absl::Status(const lockstep::v1::PullRequest& request,
                                             absl::Time deadline, ChunkSink& sink)>;

  // Listens on `host` at a free port. InvalidArgument for bad `options`.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(
      const std::string& host, Handler handler, const TcpDataServerOptions& options = {});
  ~TcpDataServer();  // Shutdown()
  TcpDataServer(const TcpDataServer&) = delete;
  TcpDataServer& operator=(const TcpDataServer&) = delete;

  // "host:port" bound.
  const std::string& address() const { return address_; }

  // Stops accepting, stops every connection within a poll slice (a pull being written
  // stops and its connection closes) and joins the threads. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // What the data plane holds now and has done since Start.
  struct Stats {
    int unauthenticated = 0;  // connections in the handshake
    int evicting = 0;         // evicted from the handshake, their threads not yet ended
    int authenticated = 0;    // connections past the handshake (served)
    int64_t accepted = 0;
    int64_t evicted = 0;    // closed in the handshake for a newer connection
    int64_t timed_out = 0;  // not through the handshake within auth_timeout
    int64_t refused = 0;    // closed unserved: past max_connections, or every bound full
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `ready(stats())` holds or `timeout` passed; whether it held (tests).
  bool AwaitStats(const std::function<bool(const Stats&)>& ready, absl::Duration timeout) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kHandshake, kEvicted, kServing, kEnded };
  struct Connection {
    TcpSocket socket;  // closed (by its own thread, under mu_) when it ends
    std::thread thread;
    absl::Time accepted;
    State state = State::kHandshake;  // guarded by mu_
  };

  TcpDataServer(TcpSocket listener, std::string address, Handler handler,
                const TcpDataServerOptions& options,
                std::shared_ptr<const security::TlsContext> tls);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a new connection may start its handshake; evicts the oldest one in its
  // handshake when they are at the bound.
  bool MakeRoom() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Serve(Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  // TLS and the first frame, by `deadline`; without a token the first frame is a
  // request's prefix, left in `*first`.
  absl::Status Handshake(TcpSocket& socket, absl::Time deadline, const StopFn& stop,
                         std::optional<RequestPrefix>* first) const;
  // Moves `connection` from the handshake to the served ones; false when it was evicted
  // or max_connections are served.
  bool Admit(Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes `connection`'s socket, marks it ended, and joins the others that ended.
  void End(Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the ended connections out of `connections_` (their threads are to be joined).
  std::list<Connection> TakeEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs a refusal at most once a minute.
  void NoteRefusal(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TcpSocket listener_;
  const std::string address_;
  const Handler handler_;
  const TcpDataServerOptions options_;
  const std::shared_ptr<const security::TlsContext> tls_;  // null: plain TCP
  // Pullers must present it first on each connection (tcp_auth.h); empty: no check.
  const std::string cluster_token_ = security::ProcessClusterSecurity().cluster_token;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);  // in accept order
  Stats stats_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refusal_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TCP_DATA_SERVER_H_
