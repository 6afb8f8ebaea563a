#include "runtime/transfer/tcp_data_server.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "runtime/transfer/tcp_auth.h"

namespace lockstep::transfer {
namespace {

// How long a request may take to arrive once its first byte did.
constexpr absl::Duration kRequestTimeout = absl::Seconds(10);
// A pull's deadline when the puller gave none.
constexpr absl::Duration kDefaultPullTimeout = absl::Minutes(10);
// How often idle threads (accepting, between pulls) check for shutdown; Shutdown also
// wakes them by shutting their sockets down.
constexpr absl::Duration kIdleSlice = absl::Milliseconds(250);

// Frames written straight from the KV slab with one gathered socket write per chunk.
class TcpChunkSink : public ChunkSink {
 public:
  TcpChunkSink(const TcpSocket& socket, absl::Time deadline, const std::atomic<bool>& stopping)
      : socket_(socket), deadline_(deadline), stopping_(stopping) {}

  bool Write(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
             absl::Span<const uint32_t> crcs, const std::shared_ptr<const void>& /*keep_alive*/,
             const absl::Notification& abort) override {
    FrameHeader frame;
    frame.kind = FrameKind::kChunk;
    frame.pool = header.pool;
    frame.first_block = header.first_block;
    frame.block_offset = header.block_offset;
    frame.num_crcs = static_cast<uint32_t>(crcs.size());
    iov_.clear();
    iov_.push_back({&frame, sizeof(frame)});
    iov_.push_back({const_cast<uint32_t*>(crcs.data()), crcs.size() * sizeof(uint32_t)});
    for (const ByteRange& piece : pieces) {
      iov_.push_back({const_cast<uint8_t*>(piece.data), piece.size});
      frame.size += piece.size;
    }
    return Send(abort);
  }

  bool WriteTrailer(const lockstep::v1::PullTrailer& trailer) override {
    const std::string bytes = trailer.SerializeAsString();
    FrameHeader frame;
    frame.kind = FrameKind::kTrailer;
    frame.size = bytes.size();
    iov_.clear();
    iov_.push_back({&frame, sizeof(frame)});
    iov_.push_back({const_cast<char*>(bytes.data()), bytes.size()});
    static const absl::Notification never;
    return Send(never);
  }

  // Whether a write failed: the stream is then mid-frame, and the connection unusable.
  bool broken() const { return broken_; }

 private:
  bool Send(const absl::Notification& abort) {
    const absl::Status sent = SendAll(socket_, std::move(iov_), deadline_, [&] {
      return abort.HasBeenNotified() || stopping_.load(std::memory_order_relaxed);
    });
    iov_ = {};
    if (!sent.ok()) broken_ = true;
    return sent.ok();
  }

  const TcpSocket& socket_;
  const absl::Time deadline_;
  const std::atomic<bool>& stopping_;
  std::vector<iovec> iov_;
  bool broken_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(const std::string& host,
                                                                    Handler handler,
                                                                    int max_connections) {
  std::shared_ptr<const security::TlsContext> tls;
  if (const security::ClusterSecurity security = security::ProcessClusterSecurity();
      security.tls()) {
    absl::StatusOr<std::shared_ptr<const security::TlsContext>> context =
        security::TlsContext::ForServer(security.tls_cert_pem, security.tls_key_pem);
    if (!context.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data plane TLS (LOCKSTEP_TLS_CERT_FILE, LOCKSTEP_TLS_KEY_FILE): ",
          context.status().message()));
    }
    tls = *std::move(context);
  }
  absl::StatusOr<std::pair<TcpSocket, int>> listening = ListenTcp(host);
  if (!listening.ok()) return listening.status();
  std::unique_ptr<TcpDataServer> server(
      new TcpDataServer(std::move(listening->first), HostPort{host, listening->second}.ToString(),
                        std::move(handler), max_connections, std::move(tls)));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpDataServer::TcpDataServer(TcpSocket listener, std::string address, Handler handler,
                             int max_connections,
                             std::shared_ptr<const security::TlsContext> tls)
    : listener_(std::move(listener)),
      address_(std::move(address)),
      handler_(std::move(handler)),
      max_connections_(max_connections),
      tls_(std::move(tls)) {
  LOCKSTEP_LOG_INFO("transfer", "data plane at {}{}", address_, tls_ != nullptr ? " (TLS)" : "");
}

TcpDataServer::~TcpDataServer() { Shutdown(); }

void TcpDataServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  stopping_.store(true);
  listener_.ShutdownBoth();  // wakes the accept thread's poll
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.splice(connections.end(), connections_);
  }
  for (Connection& connection : connections) connection.socket.ShutdownBoth();
  for (Connection& connection : connections) connection.thread.join();
  listener_.Close();
}

void TcpDataServer::Reap() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done.load()) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpDataServer::AcceptLoop() {
  const StopFn stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  for (;;) {
    absl::StatusOr<TcpSocket> accepted = AcceptTcp(listener_, stop, kIdleSlice);
    if (!accepted.ok()) {
      if (!stop()) {
        LOCKSTEP_LOG_ERROR("transfer", "data plane {} stops accepting: {}", address_,
                           accepted.status().ToString());
      }
      return;
    }
    absl::MutexLock lock(&mu_);
    Reap();
    if (static_cast<int>(connections_.size()) >= max_connections_) {
      LOCKSTEP_LOG_WARN("transfer", "data plane {}: {} connections open, refusing another",
                        address_, connections_.size());
      continue;  // `accepted` closes
    }
    Connection& connection = connections_.emplace_back();
    connection.socket = std::move(*accepted);
    connection.thread = std::thread([this, &connection] { Serve(&connection); });
  }
}

void TcpDataServer::Serve(Connection* connection) {
  const TcpSocket& socket = connection->socket;
  const StopFn stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  bool authenticated = cluster_token_.empty();
  if (tls_ != nullptr) {
    const absl::Status handshake =
        StartTlsServer(connection->socket, *tls_, absl::Now() + kRequestTimeout, stop);
    if (!handshake.ok()) {
      if (!stop()) NoteRejectedConnection(socket, handshake);
      connection->socket.ShutdownBoth();
      connection->done.store(true);
      return;
    }
  }
  for (;;) {
    RequestPrefix prefix;
    // Idle between pulls: no deadline, only shutdown (or the puller closing) ends it.
    if (!RecvAll(socket, &prefix, sizeof(prefix), absl::InfiniteFuture(), stop, kIdleSlice).ok()) {
      break;
    }
    const absl::Time now = absl::Now();
    const absl::Time deadline = prefix.timeout_ms > 0 ? now + absl::Milliseconds(prefix.timeout_ms)
                                                      : now + kDefaultPullTimeout;
    if (!authenticated || prefix.magic == kTcpAuthMagic) {
      const absl::Status auth =
          CheckTcpToken(socket, prefix, cluster_token_, now + kRequestTimeout, stop);
      if (auth.ok()) {
        authenticated = true;
        continue;
      }
      SendStatusFrame(socket, auth, now + kRequestTimeout, stop).IgnoreError();
      break;
    }
    lockstep::v1::PullRequest request;
    absl::Status bad;
    if (prefix.magic != kTcpWireMagic || prefix.request_bytes > kMaxTcpRequestBytes) {
      bad = absl::InvalidArgumentError(absl::StrCat("not a KV pull request (magic ", prefix.magic,
                                                    ", ", prefix.request_bytes, " bytes)"));
    } else {
      std::string bytes(prefix.request_bytes, '\0');
      if (!RecvAll(socket, bytes.data(), bytes.size(), now + kRequestTimeout, stop).ok()) break;
      if (!request.ParseFromString(bytes)) {
        bad = absl::InvalidArgumentError("the KV pull request does not parse");
      }
    }
    if (!bad.ok()) {
      SendStatusFrame(socket, bad, now + kRequestTimeout, stop).IgnoreError();
      break;
    }
    TcpChunkSink sink(socket, deadline, stopping_);
    const absl::Status outcome = handler_(request, deadline, sink);
    // A write cut short leaves the stream mid-frame: only closing can end it.
    if (sink.broken() || stop()) break;
    if (!SendStatusFrame(socket, outcome, deadline, stop).ok()) break;
  }
  connection->socket.ShutdownBoth();
  connection->done.store(true);
}

}  // namespace lockstep::transfer
