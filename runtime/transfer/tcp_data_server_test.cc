// The data plane's admission (tcp_data_server.h): idle connections in the handshake do
// not count against max_connections and are evicted by newer ones; a handshake must end
// within auth_timeout of the accept, however slowly its bytes drip in; an ended
// connection's socket is closed at once.
#include "runtime/transfer/tcp_data_server.h"

#include <dirent.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/security/cluster_security.h"
#include "runtime/transfer/tcp_auth.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;
using Stats = TcpDataServer::Stats;

constexpr char kToken[] = "cluster-token";
constexpr absl::Duration kWait = absl::Seconds(30);

// Open file descriptors of this process.
int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int count = 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count;
}

class TcpDataServerTest : public ::testing::Test {
 protected:
  // A data plane of a cluster whose token is kToken; every pull that reaches the
  // handler is refused with NotFound and counted.
  void Start(const TcpDataServerOptions& options) {
    security::ClusterSecurity cluster;
    cluster.cluster_token = kToken;
    security::ScopedClusterSecurity scoped(cluster);  // the server captures it at start
    absl::StatusOr<std::unique_ptr<TcpDataServer>> server = TcpDataServer::Start(
        "127.0.0.1",
        [this](const lockstep::v1::PullRequest&, absl::Time, ChunkSink&) {
          handled_.fetch_add(1);
          return absl::NotFoundError("no such claim");
        },
        options);
    ASSERT_THAT(server.status(), IsOk());
    server_ = *std::move(server);
  }

  TcpSocket Connect() {
    absl::StatusOr<TcpSocket> socket = ConnectTcp(server_->address(), absl::Now() + kWait);
    EXPECT_THAT(socket.status(), IsOk());
    return socket.ok() ? *std::move(socket) : TcpSocket();
  }

  // Sends one pull request and reads the status frame that ends it.
  static absl::Status Pull(const TcpSocket& socket) {
    const absl::Time deadline = absl::Now() + kWait;
    const std::string bytes = lockstep::v1::PullRequest().SerializeAsString();
    RequestPrefix prefix;
    prefix.request_bytes = static_cast<uint32_t>(bytes.size());
    prefix.timeout_ms = 10'000;
    if (absl::Status s = SendAll(
            socket, {{&prefix, sizeof(prefix)}, {const_cast<char*>(bytes.data()), bytes.size()}},
            deadline, nullptr);
        !s.ok()) {
      return s;
    }
    FrameHeader frame;
    if (absl::Status s = RecvAll(socket, &frame, sizeof(frame), deadline, nullptr); !s.ok()) {
      return s;
    }
    if (frame.kind != FrameKind::kStatus || frame.size > kMaxTcpStatusBytes) {
      return absl::DataLossError("not a status frame");
    }
    std::string text(frame.size, '\0');
    if (absl::Status s = RecvAll(socket, text.data(), text.size(), deadline, nullptr); !s.ok()) {
      return s;
    }
    return StatusFromFrame(frame, text);
  }

  // A puller: token, then one pull, which the handler answers.
  absl::Status TokenAndPull(const TcpSocket& socket) {
    if (absl::Status s = SendTcpToken(socket, kToken, absl::Now() + kWait); !s.ok()) return s;
    return Pull(socket);
  }

  // Whether the server closed `socket` within `wait` (nothing else arrives on it).
  static bool ClosedWithin(const TcpSocket& socket, absl::Duration wait) {
    char byte;
    return absl::IsUnavailable(RecvAll(socket, &byte, 1, absl::Now() + wait, nullptr));
  }

  bool Await(const std::function<bool(const Stats&)>& ready) {
    return server_->AwaitStats(ready, kWait);
  }

  std::atomic<int> handled_{0};
  std::unique_ptr<TcpDataServer> server_;
};

TEST_F(TcpDataServerTest, IdleConnectionsDoNotLockPullersOut) {
  Start({.max_connections = 2, .max_unauthenticated = 4, .auth_timeout = absl::Hours(1)});
  // Ten connections that never send a byte: the oldest six are evicted by newer ones.
  // (Each waits for the last eviction to end: a burst faster than evicted threads end
  // is refused outright, which bounds the threads.)
  std::vector<TcpSocket> idle;
  for (int i = 1; i <= 10; ++i) {
    idle.push_back(Connect());
    ASSERT_TRUE(Await([i](const Stats& s) { return s.accepted == i && s.evicting == 0; }));
  }
  EXPECT_EQ(server_->stats().unauthenticated, 4);
  EXPECT_EQ(server_->stats().evicted, 6);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(ClosedWithin(idle[i], kWait)) << "idle " << i;

  // Pullers still get in, and only they count against max_connections.
  TcpSocket first = Connect();
  EXPECT_THAT(TokenAndPull(first),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such claim")));
  TcpSocket second = Connect();
  EXPECT_THAT(TokenAndPull(second), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(handled_.load(), 2);
  EXPECT_EQ(server_->stats().authenticated, 2);
  // A third puller is past max_connections: closed unserved.
  TcpSocket third = Connect();
  EXPECT_THAT(TokenAndPull(third), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(handled_.load(), 2);
  EXPECT_GE(server_->stats().refused, 1);
  // The first two keep being served.
  EXPECT_THAT(Pull(first), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(handled_.load(), 3);
}

TEST_F(TcpDataServerTest, AHandshakeMustEndWithinTheDeadline) {
  // Short, so the test is quick; each check waits far longer than this.
  Start({.auth_timeout = absl::Milliseconds(200)});
  // Silent.
  TcpSocket silent = Connect();
  ASSERT_TRUE(ClosedWithin(silent, kWait));
  // Fifteen of the sixteen bytes of a token frame's prefix.
  TcpSocket partial = Connect();
  RequestPrefix prefix;
  prefix.magic = kTcpAuthMagic;
  prefix.request_bytes = kMaxTcpTokenBytes;
  ASSERT_THAT(SendAll(partial, &prefix, sizeof(prefix) - 1, absl::Now() + kWait, nullptr), IsOk());
  ASSERT_TRUE(ClosedWithin(partial, kWait));
  // A whole prefix, then the token one byte at a time, each within 20 ms of the last:
  // closed long before the 4096th byte (over 80 s of drip).
  TcpSocket drip = Connect();
  ASSERT_THAT(SendAll(drip, &prefix, sizeof(prefix), absl::Now() + kWait, nullptr), IsOk());
  bool closed = false;
  for (uint32_t sent = 0; sent + 1 < kMaxTcpTokenBytes && !closed; ++sent) {
    const char byte = 'x';
    closed = !SendAll(drip, &byte, 1, absl::Now() + kWait, nullptr).ok() ||
             ClosedWithin(drip, absl::Milliseconds(20));
  }
  EXPECT_TRUE(closed);
  EXPECT_TRUE(Await([](const Stats& s) { return s.timed_out == 3 && s.unauthenticated == 0; }));
  // A puller that keeps to the deadline is served.
  TcpSocket puller = Connect();
  EXPECT_THAT(TokenAndPull(puller), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(handled_.load(), 1);
}

TEST_F(TcpDataServerTest, AnEndedConnectionsSocketIsClosedAtOnce) {
  Start({});
  const int before = OpenFds();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 5; ++i) {
    TcpSocket socket = Connect();
    EXPECT_THAT(TokenAndPull(socket), StatusIs(absl::StatusCode::kNotFound));
  }  // each closed by the puller
  // No accept follows: each connection's own thread closed its socket as it ended.
  ASSERT_TRUE(Await([](const Stats& s) { return s.authenticated == 0 && s.accepted == 5; }));
  EXPECT_EQ(OpenFds(), before);
}

TEST_F(TcpDataServerTest, OptionsAreValidated) {
  EXPECT_THAT(TcpDataServerOptions{.max_connections = 0}.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_connections")));
  EXPECT_THAT(TcpDataServerOptions{.max_unauthenticated = 0}.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_unauthenticated")));
  EXPECT_THAT(TcpDataServerOptions{.auth_timeout = absl::ZeroDuration()}.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auth_timeout")));
  EXPECT_THAT(TcpDataServerOptions{}.Validate(), IsOk());
}

}  // namespace
}  // namespace lockstep::transfer
