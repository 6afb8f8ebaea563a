#include "runtime/transfer/tcp_data_server.h"

#include <algorithm>
#include <iterator>
#include <list>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/log.h"
#include "runtime/transfer/tcp_auth.h"

namespace lockstep::transfer {
namespace {

// How long a request may take to arrive once its prefix did.
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

absl::Status TcpDataServerOptions::Validate() const {
  if (max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: max_connections must be >= 1, got ", max_connections));
  }
  if (max_unauthenticated < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane: max_unauthenticated must be >= 1, got ", max_unauthenticated));
  }
  if (auth_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("data plane: auth_timeout must be > 0, got ",
                                                   absl::FormatDuration(auth_timeout)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(
    const std::string& host, Handler handler, const TcpDataServerOptions& options) {
  if (absl::Status valid = options.Validate(); !valid.ok()) return valid;
  std::shared_ptr<const security::TlsContext> tls;
  if (const security::ClusterSecurity security = security::ProcessClusterSecurity();
      security.tls()) {
    absl::StatusOr<std::shared_ptr<const security::TlsContext>> context =
        security::TlsContext::ForServer(security.tls_cert_pem, security.tls_key_pem);
    if (!context.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data plane TLS (LOCKSTEP_TLS_CERT_FILE, LOCKSTEP_TLS_KEY_FILE): ",
                       context.status().message()));
    }
    tls = *std::move(context);
  }
  absl::StatusOr<std::pair<TcpSocket, int>> listening = ListenTcp(host);
  if (!listening.ok()) return listening.status();
  std::unique_ptr<TcpDataServer> server(
      new TcpDataServer(std::move(listening->first), HostPort{host, listening->second}.ToString(),
                        std::move(handler), options, std::move(tls)));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpDataServer::TcpDataServer(TcpSocket listener, std::string address, Handler handler,
                             const TcpDataServerOptions& options,
                             std::shared_ptr<const security::TlsContext> tls)
    : listener_(std::move(listener)),
      address_(std::move(address)),
      handler_(std::move(handler)),
      options_(options),
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
    // Under mu_: a connection's thread closes its own socket under it too.
    for (Connection& connection : connections_) connection.socket.ShutdownBoth();
    connections.splice(connections.end(), connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
  listener_.Close();
}

TcpDataServer::Stats TcpDataServer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool TcpDataServer::AwaitStats(const std::function<bool(const Stats&)>& ready,
                               absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  const auto holds = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ready(stats_); };
  return mu_.AwaitWithTimeout(absl::Condition(&holds), timeout);
}

std::list<TcpDataServer::Connection> TcpDataServer::TakeEnded() {
  std::list<Connection> ended;
  for (auto it = connections_.begin(); it != connections_.end();) {
    auto next = std::next(it);
    if (it->state == State::kEnded) ended.splice(ended.end(), connections_, it);
    it = next;
  }
  return ended;
}

void TcpDataServer::NoteRefusal(const char* why) {
  ++stats_.refused;
  const absl::Time now = absl::Now();
  if (now - last_refusal_log_ < absl::Minutes(1)) return;
  last_refusal_log_ = now;
  LOCKSTEP_LOG_WARN("transfer",
                    "data plane {}: refusing a connection: {} ({} served, {} in the handshake, "
                    "{} refused so far); pullers refused pull over gRPC",
                    address_, why, stats_.authenticated, stats_.unauthenticated, stats_.refused);
}

bool TcpDataServer::MakeRoom() {
  if (stats_.unauthenticated < options_.max_unauthenticated) return true;
  if (stats_.evicting >= options_.max_unauthenticated) {
    NoteRefusal("too many connections in the handshake");
    return false;
  }
  for (Connection& oldest : connections_) {
    if (oldest.state != State::kHandshake) continue;
    oldest.state = State::kEvicted;
    oldest.socket.ShutdownBoth();  // its thread ends within a poll
    --stats_.unauthenticated;
    ++stats_.evicting;
    ++stats_.evicted;
    return true;
  }
  return true;  // unreachable: the count says one is in the handshake
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
    std::list<Connection> ended;
    {
      absl::MutexLock lock(&mu_);
      ended = TakeEnded();
      ++stats_.accepted;
      if (MakeRoom()) {
        ++stats_.unauthenticated;
        Connection& connection = connections_.emplace_back();
        connection.socket = std::move(*accepted);
        connection.accepted = absl::Now();
        connection.thread = std::thread([this, &connection] { Serve(&connection); });
      }
    }  // a refused `accepted` closes here
    for (Connection& connection : ended) connection.thread.join();
  }
}

absl::Status TcpDataServer::Handshake(TcpSocket& socket, absl::Time deadline, const StopFn& stop,
                                      std::optional<RequestPrefix>* first) const {
  if (tls_ != nullptr) {
    const absl::Status s = StartTlsServer(socket, *tls_, deadline, stop);
    if (!s.ok() && !stop() && !absl::IsDeadlineExceeded(s)) NoteRejectedConnection(socket, s);
    if (!s.ok()) return s;
  }
  RequestPrefix prefix;
  if (absl::Status s = RecvAll(socket, &prefix, sizeof(prefix), deadline, stop, kIdleSlice);
      !s.ok()) {
    return s;
  }
  if (cluster_token_.empty() && prefix.magic != kTcpAuthMagic) {
    *first = prefix;  // no token to wait for: the first request
    return absl::OkStatus();
  }
  const absl::Status auth = CheckTcpToken(socket, prefix, cluster_token_, deadline, stop);
  if (absl::IsUnauthenticated(auth)) SendStatusFrame(socket, auth, deadline, stop).IgnoreError();
  return auth;
}

bool TcpDataServer::Admit(Connection* connection) {
  absl::MutexLock lock(&mu_);
  if (connection->state == State::kEvicted) return false;
  if (stats_.authenticated >= options_.max_connections) {
    NoteRefusal("max_connections served");
    return false;
  }
  connection->state = State::kServing;
  --stats_.unauthenticated;
  ++stats_.authenticated;
  return true;
}

void TcpDataServer::End(Connection* connection) {
  std::list<Connection> ended;
  {
    absl::MutexLock lock(&mu_);
    switch (connection->state) {
      case State::kHandshake:
        --stats_.unauthenticated;
        break;
      case State::kEvicted:
        --stats_.evicting;
        break;
      case State::kServing:
        --stats_.authenticated;
        break;
      case State::kEnded:
        break;
    }
    connection->socket.Close();
    connection->state = State::kEnded;
    ended = TakeEnded();
    // This connection is joined by whoever ends or accepts next, or by Shutdown.
    for (auto it = ended.begin(); it != ended.end(); ++it) {
      if (&*it == connection) {
        connections_.splice(connections_.end(), ended, it);
        break;
      }
    }
  }
  for (Connection& other : ended) other.thread.join();
}

void TcpDataServer::Serve(Connection* connection) {
  TcpSocket& socket = connection->socket;
  const StopFn stop = [this] { return stopping_.load(std::memory_order_relaxed); };
  std::optional<RequestPrefix> first;
  const absl::Status handshake =
      Handshake(socket, connection->accepted + options_.auth_timeout, stop, &first);
  if (!handshake.ok()) {
    if (absl::IsDeadlineExceeded(handshake)) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.timed_out;
      }
      NoteRejectedConnection(
          socket, absl::DeadlineExceededError(absl::StrCat(
                      "no handshake within ", absl::FormatDuration(options_.auth_timeout))));
    }
    End(connection);
    return;
  }
  if (!Admit(connection)) {
    End(connection);
    return;
  }
  for (;;) {
    RequestPrefix prefix;
    if (first.has_value()) {
      prefix = *first;
      first.reset();
    } else if (!RecvAll(socket, &prefix, sizeof(prefix), absl::InfiniteFuture(), stop, kIdleSlice)
                    .ok()) {
      break;  // idle between pulls: only shutdown (or the puller closing) ends it
    }
    const absl::Time now = absl::Now();
    const absl::Time deadline = prefix.timeout_ms > 0 ? now + absl::Milliseconds(prefix.timeout_ms)
                                                      : now + kDefaultPullTimeout;
    if (prefix.magic == kTcpAuthMagic) {  // a token again: checked again
      const absl::Status auth =
          CheckTcpToken(socket, prefix, cluster_token_, now + kRequestTimeout, stop);
      if (auth.ok()) continue;
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
  End(connection);
}

}  // namespace lockstep::transfer
