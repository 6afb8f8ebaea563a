// The router's HTTP listener bounds (docs/security.md §5), over real sockets: a body
// over router.max_request_body_bytes is 413 (before the body, with Expect:
// 100-continue), a head over the header limits 431, a chunked or compressed body 411 /
// 415, a connection beyond router.max_connections 503 without being read, an idle
// connection is closed but a quiet stream is not, slow-drip clients are cut after
// router.http_read_timeout_ms in all while others are served, a client that stops
// reading its stream is cut after router.http_write_timeout_ms while another stream
// completes, and a non-streaming request whose client left is cancelled at its worker.
// /health and /metrics are behind the API key when configured.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A plain TCP connection to the router for what httplib's client cannot send (or does
// not stop reading); every wait is bounded.
class RawConnection {
 public:
  // `receive_buffer` > 0: SO_RCVBUF before connecting (a small window fills quickly).
  explicit RawConnection(const std::string& address, int receive_buffer = 0) {
    const absl::StatusOr<HostPort> host_port = ParseHostPort(address);
    EXPECT_THAT(host_port, IsOk());
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(host_port->port));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  }
  ~RawConnection() { Close(); }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void Send(const std::string& bytes) { ASSERT_TRUE(TrySend(bytes)); }
  // False when the router has closed the connection.
  bool TrySend(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // True when the router sent something (or closed) within `timeout`.
  bool Readable(absl::Duration timeout) {
    pollfd fd{.fd = fd_, .events = POLLIN, .revents = 0};
    return ::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0;
  }

  // What arrives until the router closes the connection, `until` appears, or `timeout`
  // passes; `closed` says whether the router closed it.
  std::string Receive(absl::Duration timeout, const std::string& until = "",
                      bool* closed = nullptr) {
    std::string received;
    const absl::Time deadline = absl::Now() + timeout;
    if (closed != nullptr) *closed = false;
    while (until.empty() || received.find(until) == std::string::npos) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      pollfd fd{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        if (closed != nullptr) *closed = true;
        break;
      }
      received.append(buffer, static_cast<size_t>(n));
    }
    return received;
  }

 private:
  int fd_ = -1;
};

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream = false) {
  return absl::StrCat(R"({"model":")", testing::kModel, R"(","prompt":")", prompt,
                      R"(","max_tokens":)", max_tokens, stream ? R"(,"stream":true})" : "}");
}

std::string PostHead(const std::string& extra_headers, size_t content_length) {
  return absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: router\r\nContent-Type: "
                      "application/json\r\n",
                      extra_headers, "Content-Length: ", content_length, "\r\n\r\n");
}

class HttpLimitsTest : public ::testing::Test {
 protected:
  void Start(const std::function<void(config::RouterConfig&)>& adjust) {
    config::DeploymentConfig config =
        testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    adjust(config.router);
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
        testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
  }

  testing::HttpClient Client() { return testing::HttpClient(router_->http_address()); }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<testing::FakeWorker> worker_;
};

TEST_F(HttpLimitsTest, BodyOverTheLimitIs413WithAnOpenAiError) {
  Start([](config::RouterConfig& router) { router.max_request_body_bytes = 1024; });
  const std::string big = CompletionBody(std::string(4000, 'a'), 2);
  testing::HttpResult result = Client().Post("/v1/completions", big);
  EXPECT_EQ(result.status, 413) << result.body;
  EXPECT_THAT(result.json["error"]["message"].dump(), HasSubstr("router.max_request_body_bytes"));
  EXPECT_TRUE(worker_->requests().empty());
  // A body within the limit is served (on a new connection).
  result = Client().Post("/v1/completions", CompletionBody("ok", 3));
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], testing::FakeWorker::ExpectedText("ok", 3));
}

// With `Expect: 100-continue` the 413 comes instead of the 100, so the client never
// sends the oversized body; a body within the limit gets the 100 and is served.
TEST_F(HttpLimitsTest, ExpectContinueIsAnswered413BeforeAnOversizedBody) {
  Start([](config::RouterConfig& router) { router.max_request_body_bytes = 1024; });
  {
    RawConnection big(router_->http_address());
    big.Send(PostHead("Expect: 100-continue\r\n", 4096));
    bool closed = false;
    const std::string response = big.Receive(absl::Seconds(10), "", &closed);
    EXPECT_THAT(response, StartsWith("HTTP/1.1 413"));
    EXPECT_THAT(response, Not(HasSubstr("100 Continue")));
    EXPECT_THAT(response, HasSubstr("router.max_request_body_bytes"));
    EXPECT_TRUE(closed);
  }
  RawConnection small(router_->http_address());
  const std::string body = CompletionBody("ok", 3);
  small.Send(PostHead("Expect: 100-continue\r\n", body.size()));
  EXPECT_THAT(small.Receive(absl::Seconds(10), "\r\n\r\n"), StartsWith("HTTP/1.1 100 Continue"));
  small.Send(body);
  const std::string text = testing::FakeWorker::ExpectedText("ok", 3);
  const std::string response = small.Receive(absl::Seconds(10), text);
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(response, HasSubstr(text));
  EXPECT_EQ(worker_->requests().size(), 1u);
}

TEST_F(HttpLimitsTest, HeadOverTheLimitsIs431) {
  Start([](config::RouterConfig& router) {
    router.max_header_bytes = 2048;
    router.max_header_count = 8;
  });
  httplib::Headers many;
  for (int i = 0; i < 20; ++i) many.emplace(absl::StrCat("X-Extra-", i), "1");
  testing::HttpResult result = Client().Post("/v1/completions", CompletionBody("a", 2), many);
  EXPECT_EQ(result.status, 431) << result.body;
  EXPECT_THAT(result.json["error"]["message"].dump(), HasSubstr("router.max_header_count"));

  result = Client().Post("/v1/completions", CompletionBody("a", 2),
                         {{"X-Long", std::string(4096, 'b')}});
  EXPECT_EQ(result.status, 431) << result.body;
  EXPECT_TRUE(worker_->requests().empty());
  // Within both limits.
  result = Client().Post("/v1/completions", CompletionBody("a", 2), {{"X-Extra", "1"}});
  EXPECT_EQ(result.status, 200) << result.body;
}

TEST_F(HttpLimitsTest, ChunkedAndCompressedBodiesAreRefused) {
  Start([](config::RouterConfig&) {});
  const std::string body = CompletionBody("a", 2);
  {
    RawConnection connection(router_->http_address());
    connection.Send(absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n",
        absl::Hex(body.size()), "\r\n", body, "\r\n0\r\n\r\n"));
    bool closed = false;
    const std::string response = connection.Receive(absl::Seconds(10), "", &closed);
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 411"));
    EXPECT_THAT(response, HasSubstr("Content-Length"));
    EXPECT_TRUE(closed);
  }
  {
    RawConnection connection(router_->http_address());
    connection.Send(PostHead("Content-Encoding: gzip\r\n", body.size()) + body);
    EXPECT_THAT(connection.Receive(absl::Seconds(10)), HasSubstr("HTTP/1.1 415"));
  }
  EXPECT_TRUE(worker_->requests().empty());
}

TEST_F(HttpLimitsTest, ConnectionsBeyondTheLimitGet503WithoutBeingRead) {
  Start([](config::RouterConfig& router) {
    router.max_connections = 2;  // (http_threads is 16)
    router.http_idle_timeout_ms = 60000;  // the held connections stay open
  });
  // Two connections, each served once and then held open (keep-alive).
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<RawConnection>(router_->http_address()));
    held.back()->Send("GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
    EXPECT_THAT(held.back()->Receive(absl::Seconds(10), "\"instances\""),
                HasSubstr("HTTP/1.1 200"));
  }
  // A third is refused before it sends anything, and closed.
  {
    RawConnection refused(router_->http_address());
    bool closed = false;
    const std::string response = refused.Receive(absl::Seconds(10), "", &closed);
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 503"));
    EXPECT_THAT(response, HasSubstr("Retry-After: 1"));
    EXPECT_THAT(response, HasSubstr("router.max_connections"));
    EXPECT_TRUE(closed);
  }
  // The held ones still work; once one closes, a new connection is served.
  held[0]->Send("GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
  EXPECT_THAT(held[0]->Receive(absl::Seconds(10), "\"instances\""), HasSubstr("HTTP/1.1 200"));
  held[1]->Close();
  EXPECT_TRUE(lockstep::testing::PollUntil([&] { return Client().Get("/health").status == 200; }));
}

TEST_F(HttpLimitsTest, IdleConnectionsCloseButAQuietStreamDoesNot) {
  constexpr int kIdleMs = 200;
  Start([&](config::RouterConfig& router) {
    router.http_first_request_timeout_ms = kIdleMs;
    router.http_idle_timeout_ms = kIdleMs;
    router.http_read_timeout_ms = kIdleMs;
  });
  {
    RawConnection idle(router_->http_address());
    bool closed = false;
    const absl::Time start = absl::Now();
    EXPECT_EQ(idle.Receive(absl::Seconds(10), "", &closed), "");
    EXPECT_TRUE(closed);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(kIdleMs) - absl::Milliseconds(20));
  }
  // A stream whose worker produces nothing more stays open (keep-alive comments) for
  // many idle timeouts.
  worker_->SetStallAfter(1);
  RawConnection stream(router_->http_address());
  const std::string body = CompletionBody("q", 8, /*stream=*/true);
  stream.Send(PostHead("", body.size()) + body);
  bool closed = false;
  const std::string received = stream.Receive(10 * absl::Milliseconds(kIdleMs), "", &closed);
  EXPECT_FALSE(closed) << received;
  EXPECT_THAT(received, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(received, HasSubstr(": keep-alive"));
  stream.Close();
  worker_->SetStallAfter(-1);
}

// One deadline covers a request's head and body, however they trickle in: slow-drip
// clients, more than the pool has threads, each sending a byte every 20 ms (well within
// the read timeout per byte; the request line, a header, or the body) and reconnecting
// whenever they are cut, get 408 after router.http_read_timeout_ms and cannot hold the
// router: /health, /metrics and a completion are served meanwhile.
TEST_F(HttpLimitsTest, SlowDripClientsAreCutWhileOtherClientsAreServed) {
  constexpr int kThreads = 4;
  constexpr int kSlowClients = 3 * kThreads;
  Start([](config::RouterConfig& router) {
    router.http_threads = kThreads;
    router.max_connections = 64;
    router.http_read_timeout_ms = 300;
  });
  // What the router answered each slow client, one line per cut.
  absl::Mutex mu;
  std::vector<std::string> answers;
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  absl::Cleanup join_slow = [&] {
    stop.store(true);
    for (std::thread& thread : slow) thread.join();
  };
  for (int i = 0; i < kSlowClients; ++i) {
    slow.emplace_back([&, i] {
      const std::string starts[] = {
          "POST /v1/compl",                                                  // request line
          "POST /v1/completions HTTP/1.1\r\nHost: r\r\nX-Drip: ",            // a header
          PostHead("", 1 << 20) + R"({"model":")" + testing::kModel + "\""};  // the body
      while (!stop.load()) {
        RawConnection connection(router_->http_address());
        bool open = connection.TrySend(starts[i % 3]);
        while (open && !stop.load()) {
          if (connection.Readable(absl::Milliseconds(20))) {
            bool closed = false;
            const std::string answer = connection.Receive(absl::Seconds(10), "", &closed);
            absl::MutexLock lock(&mu);
            answers.push_back(answer.substr(0, answer.find("\r\n")));
            break;
          }
          open = connection.TrySend("a");
        }
      }
    });
  }
  // Once the slow clients hold the threads (the first cuts have come), normal clients.
  EXPECT_TRUE(lockstep::testing::PollUntil([&] {
    absl::MutexLock lock(&mu);
    return answers.size() >= static_cast<size_t>(kThreads);
  }));
  // (A client per request: its connection closes after it.)
  const auto client = [&] { return testing::HttpClient(router_->http_address(), absl::Seconds(30)); };
  testing::HttpResult health = client().Get("/health");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_THAT(health.body, HasSubstr("instances"));
  testing::HttpResult metrics = client().Get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("lockstep_router"));
  testing::HttpResult completion = client().Post("/v1/completions", CompletionBody("fine", 4));
  EXPECT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(completion.json["choices"][0]["text"], testing::FakeWorker::ExpectedText("fine", 4));
  std::move(join_slow).Invoke();
  absl::MutexLock lock(&mu);
  for (const std::string& answer : answers) EXPECT_EQ(answer, "HTTP/1.1 408 Request Timeout");
  EXPECT_EQ(worker_->requests().size(), 1u);  // no slow request reached the worker
}

// A non-streaming request whose client hangs up is cancelled at its worker (the sweeper
// sees the connection closed), instead of running to its end.
TEST_F(HttpLimitsTest, ANonStreamingRequestWhoseClientLeftIsCancelledAtItsWorker) {
  Start([](config::RouterConfig& router) { router.request_timeout_s = 600; });
  worker_->SetStallAfter(1);
  {
    RawConnection leaving(router_->http_address());
    const std::string body = CompletionBody("gone", 8);
    leaving.Send(PostHead("", body.size()) + body);
    ASSERT_TRUE(worker_->AwaitStalled(1, absl::Seconds(10)));
  }
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(30)));
  ASSERT_EQ(worker_->requests().size(), 1u);
  EXPECT_TRUE(worker_->AwaitCancelRpc(worker_->requests()[0].request_id(), absl::Seconds(30)));
  // The request is counted after its flow ends (RequestRunner::Run): wait for both.
  EXPECT_TRUE(lockstep::testing::PollUntil([&] {
    return router_->flows().size() == 0 && router_->metrics().RequestCount("cancelled") >= 1;
  }));
  EXPECT_EQ(router_->metrics().RequestCount("cancelled"), 1);
  worker_->SetStallAfter(-1);
  // A client that stays is served to the end.
  testing::HttpResult result = Client().Post("/v1/completions", CompletionBody("stay", 3));
  EXPECT_EQ(result.status, 200) << result.body;
}

TEST_F(HttpLimitsTest, AClientThatStopsReadingIsCutWithoutStallingOthers) {
  Start([](config::RouterConfig& router) {
    router.http_write_timeout_ms = 500;
    router.request_timeout_s = 600;  // only the write timeout can end the stuck stream
  });
  // A long stream to a client with a small window that never reads: once the buffers
  // are full, the router's write waits at most 500 ms, then it cuts the client and
  // cancels the worker's stream.
  RawConnection stuck(router_->http_address(), /*receive_buffer=*/4096);
  const std::string body = CompletionBody("s", 1000000, /*stream=*/true);
  stuck.Send(PostHead("", body.size()) + body);
  ASSERT_TRUE(lockstep::testing::PollUntil([&] { return !worker_->requests().empty(); }));

  // Meanwhile another client's stream completes.
  testing::HttpClient other = Client();
  testing::HttpResult result =
      other.PostStream("/v1/completions", CompletionBody("other", 6, /*stream=*/true));
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(testing::SseText(result.body), testing::FakeWorker::ExpectedText("other", 6));

  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(30)));
  // Its place is given back: a plain request is served.
  result = Client().Post("/v1/completions", CompletionBody("after", 2));
  EXPECT_EQ(result.status, 200) << result.body;
}

// While a stuck client's write waits (here for up to a minute), the sweeper, which
// notices every stream's client leaving, is not held up by it: another client that hangs
// up mid-stream still has its request cancelled at its worker.
TEST_F(HttpLimitsTest, AStuckClientDoesNotDelayNoticingAnotherClientLeaving) {
  Start([](config::RouterConfig& router) {
    router.http_write_timeout_ms = 60000;
    router.request_timeout_s = 600;
  });
  RawConnection stuck(router_->http_address(), /*receive_buffer=*/4096);
  const std::string body = CompletionBody("s", 1000000, /*stream=*/true);
  stuck.Send(PostHead("", body.size()) + body);
  ASSERT_TRUE(lockstep::testing::PollUntil([&] { return !worker_->requests().empty(); }));
  // Until the buffers are full and the router's write waits: the worker sends no more.
  int64_t last = -1;
  EXPECT_TRUE(lockstep::testing::PollUntil(
      [&] {
        const int64_t now = worker_->tokens_sent();
        const bool still = now == last;
        last = now;
        return still;
      },
      absl::Seconds(30), absl::Milliseconds(200)));

  // A second stream gets nothing (its worker holds it) and its client hangs up.
  worker_->SetHold(true);
  {
    RawConnection leaving(router_->http_address());
    const std::string quiet = CompletionBody("q", 8, /*stream=*/true);
    leaving.Send(PostHead("", quiet.size()) + quiet);
    EXPECT_THAT(leaving.Receive(absl::Seconds(10), "\r\n\r\n"), HasSubstr("HTTP/1.1 200"));
    ASSERT_TRUE(worker_->AwaitHeld(1, absl::Seconds(10)));
  }
  // Its request is cancelled long before the stuck write's minute is over.
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(30)));
  EXPECT_EQ(worker_->held(), 0);
  worker_->SetHold(false);
}

TEST_F(HttpLimitsTest, HealthAndMetricsAreOpenUnlessConfigured) {
  Start([](config::RouterConfig& router) { router.api_key = "client-key"; });
  EXPECT_EQ(Client().Get("/health").status, 200);
  EXPECT_EQ(Client().Get("/metrics").status, 200);
  EXPECT_EQ(Client().Get("/v1/models").status, 401);
}

TEST_F(HttpLimitsTest, HealthAndMetricsCanNeedTheApiKey) {
  Start([](config::RouterConfig& router) {
    router.api_key = "client-key";
    router.api_key_for_health_and_metrics = true;
  });
  for (const std::string path : {"/health", "/metrics"}) {
    SCOPED_TRACE(path);
    testing::HttpResult result = Client().Get(path);
    EXPECT_EQ(result.status, 401);
    EXPECT_THAT(result.body, HasSubstr("API key"));
    EXPECT_EQ(Client().Get(path, {{"Authorization", "Bearer client-kez"}}).status, 401);
    result = Client().Get(path, {{"Authorization", "Bearer client-key"}});
    EXPECT_EQ(result.status, 200);
    EXPECT_THAT(result.body, HasSubstr(path == "/health" ? "instances" : "lockstep_router"));
  }
}

}  // namespace
}  // namespace lockstep::router
