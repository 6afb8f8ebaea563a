// The router's HTTPS listener (router.https_cert_file / https_key_file) over real
// sockets, with certificates made at test time: the API over TLS (checked against the
// CA, refused with another one), plain HTTP to the HTTPS port answered 400 while the
// router keeps serving, and every bound of the HTTP listener (docs/security.md §5)
// still holding over TLS: body and head limits, the connection limit, the idle and read
// timeouts (a handshake that never starts included), and the write timeout of a client
// that stops reading its stream; a silent connection does not hold up shutdown.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/http/router_http_client.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"
#include "runtime/security/secret.h"
#include "runtime/security/testing/test_certs.h"
#include "runtime/security/tls_session.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

// A TCP connection to the router, optionally TLS (checked against `ca_pem`), for what
// httplib's client cannot do: hold a connection, send nothing, stop reading.
class RawConnection {
 public:
  RawConnection(const std::string& address, const std::string& ca_pem, int receive_buffer = 0) {
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
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    if (ca_pem.empty()) return;
    absl::StatusOr<std::shared_ptr<const security::TlsContext>> context =
        security::TlsContext::ForClient(ca_pem);
    EXPECT_THAT(context, IsOk());
    context_ = *context;
    absl::StatusOr<std::unique_ptr<security::TlsSession>> session =
        security::TlsSession::Client(*context_, fd_, "127.0.0.1");
    EXPECT_THAT(session, IsOk());
    tls_ = *std::move(session);
  }
  ~RawConnection() { Close(); }

  // The TLS handshake (the first Send or Receive also starts it, as the peer decides).
  absl::Status Handshake() { return security::CompleteHandshake(*tls_, absl::Now() + kWait); }

  void Close() {
    tls_.reset();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void Send(const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      short wait = POLLOUT;
      const ssize_t n = tls_ != nullptr
                            ? tls_->Write(bytes.data() + sent, bytes.size() - sent, &wait)
                            : ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      ASSERT_NE(wait, 0) << tls_->error();
      ASSERT_TRUE(tls_ != nullptr || errno == EAGAIN) << std::strerror(errno);
      pollfd fd{.fd = fd_, .events = wait, .revents = 0};
      ASSERT_EQ(::poll(&fd, 1, 10'000), 1);
    }
  }

  // What arrives until the router closes the connection, `until` appears, or `timeout`
  // passes; `closed` says whether the router closed it.
  std::string Receive(absl::Duration timeout, const std::string& until = "",
                      bool* closed = nullptr) {
    std::string received;
    const absl::Time deadline = absl::Now() + timeout;
    if (closed != nullptr) *closed = false;
    short wait = POLLIN;
    while (until.empty() || received.find(until) == std::string::npos) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      if (tls_ == nullptr || !tls_->HasPending()) {
        pollfd fd{.fd = fd_, .events = wait, .revents = 0};
        if (::poll(&fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
      }
      char buffer[4096];
      wait = POLLIN;
      const ssize_t n = tls_ != nullptr ? tls_->Read(buffer, sizeof(buffer), &wait)
                                        : ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0 && (tls_ != nullptr ? wait != 0 : errno == EAGAIN)) continue;
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
  std::shared_ptr<const security::TlsContext> context_;
  std::unique_ptr<security::TlsSession> tls_;
};

std::string CompletionBody(const std::string& prompt, int max_tokens, bool stream = false) {
  return absl::StrCat(R"({"model":")", testing::kModel, R"(","prompt":")", prompt,
                      R"(","max_tokens":)", max_tokens, stream ? R"(,"stream":true})" : "}");
}

std::string PostHead(size_t content_length) {
  return absl::StrCat(
      "POST /v1/completions HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\n"
      "Content-Length: ",
      content_length, "\r\n\r\n");
}

class HttpsTest : public ::testing::Test {
 protected:
  void Start(const std::function<void(config::RouterConfig&)>& adjust = nullptr) {
    absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(::testing::TempDir());
    ASSERT_THAT(certs, IsOk());
    certs_ = *certs;
    absl::StatusOr<std::string> ca = security::ReadSecretFile(certs_.ca_file);
    ASSERT_THAT(ca, IsOk());
    ca_pem_ = *ca + "\n";
    config::DeploymentConfig config =
        testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    config.router.https_cert_file = certs_.cert_file;
    config.router.https_key_file = certs_.key_file;
    config.router.https_ca_file = certs_.ca_file;
    if (adjust) adjust(config.router);
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    url_ = RouterHttpUrl(config.router, router_->http_address());
    absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
        testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
  }

  testing::HttpClient Client() { return testing::HttpClient(url_, kWait, certs_.ca_file); }
  RawConnection Tls(int receive_buffer = 0) {
    return RawConnection(router_->http_address(), ca_pem_, receive_buffer);
  }
  RawConnection Plain() { return RawConnection(router_->http_address(), ""); }

  security::TestCerts certs_;
  std::string ca_pem_;
  std::string url_;
  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<testing::FakeWorker> worker_;
};

TEST_F(HttpsTest, ServesTheApiOverTlsCheckedAgainstTheCa) {
  Start();
  EXPECT_THAT(url_, ::testing::StartsWith("https://127.0.0.1:"));
  testing::HttpResult result = Client().Post("/v1/completions", CompletionBody("tls", 4));
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], testing::FakeWorker::ExpectedText("tls", 4));
  result = Client().PostStream("/v1/completions", CompletionBody("sse", 5, /*stream=*/true));
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(testing::SseText(result.body), testing::FakeWorker::ExpectedText("sse", 5));
  // The certificate names localhost too.
  const std::string port = url_.substr(url_.rfind(':') + 1);
  EXPECT_EQ(testing::HttpClient("https://localhost:" + port, kWait, certs_.ca_file)
                .Get("/health")
                .status,
            200);
  // Another CA, or the system's, does not trust it: no response at all.
  EXPECT_EQ(testing::HttpClient(url_, kWait, certs_.other_ca_file).Get("/health").status, 0);
  EXPECT_EQ(testing::HttpClient(url_, kWait, "").Get("/health").status, 0);
  EXPECT_EQ(worker_->requests().size(), 2u);
}

TEST_F(HttpsTest, PlainHttpToTheHttpsPortIs400AndTheRouterKeepsServing) {
  Start();
  {
    RawConnection plain = Plain();
    plain.Send("GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
    bool closed = false;
    const std::string response = plain.Receive(kWait, "", &closed);
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 400"));
    EXPECT_THAT(response, HasSubstr("this port speaks HTTPS"));
    EXPECT_TRUE(closed);
  }
  {
    // Neither TLS nor HTTP: closed without an answer.
    RawConnection garbage = Plain();
    garbage.Send(std::string("\x01\x02\x03\x04", 4));
    bool closed = false;
    EXPECT_EQ(garbage.Receive(kWait, "", &closed), "");
    EXPECT_TRUE(closed);
  }
  // httplib's plain client sees the 400 too.
  EXPECT_EQ(testing::HttpClient(router_->http_address()).Get("/health").status, 400);
  EXPECT_TRUE(worker_->requests().empty());
  testing::HttpResult result = Client().Post("/v1/completions", CompletionBody("after", 3));
  EXPECT_EQ(result.status, 200) << result.body;
}

TEST_F(HttpsTest, BodyAndHeadLimitsHoldOverTls) {
  Start([](config::RouterConfig& router) {
    router.max_request_body_bytes = 1024;
    router.max_header_count = 8;
  });
  testing::HttpResult result =
      Client().Post("/v1/completions", CompletionBody(std::string(4000, 'a'), 2));
  EXPECT_EQ(result.status, 413) << result.body;
  EXPECT_THAT(result.json["error"]["message"].dump(), HasSubstr("router.max_request_body_bytes"));
  httplib::Headers many;
  for (int i = 0; i < 20; ++i) many.emplace(absl::StrCat("X-Extra-", i), "1");
  result = Client().Post("/v1/completions", CompletionBody("a", 2), many);
  EXPECT_EQ(result.status, 431) << result.body;
  // Chunked, over a raw TLS connection: 411, then the connection is closed.
  RawConnection chunked = Tls();
  chunked.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello"
      "\r\n0\r\n\r\n");
  bool closed = false;
  EXPECT_THAT(chunked.Receive(kWait, "", &closed), HasSubstr("HTTP/1.1 411"));
  EXPECT_TRUE(closed);
  EXPECT_TRUE(worker_->requests().empty());
}

TEST_F(HttpsTest, ConnectionsBeyondTheLimitAreClosed) {
  Start([](config::RouterConfig& router) {
    router.max_connections = 2;
    router.http_idle_timeout_ms = 60000;
  });
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<RawConnection>(router_->http_address(), ca_pem_));
    held.back()->Send("GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
    EXPECT_THAT(held.back()->Receive(kWait, "\"instances\""), HasSubstr("HTTP/1.1 200"));
  }
  // A third gets no handshake: the router closes it at once.
  {
    RawConnection refused = Tls();
    EXPECT_FALSE(refused.Handshake().ok());
  }
  held[0]->Send("GET /health HTTP/1.1\r\nHost: r\r\n\r\n");
  EXPECT_THAT(held[0]->Receive(kWait, "\"instances\""), HasSubstr("HTTP/1.1 200"));
  held[1]->Close();
  EXPECT_TRUE(lockstep::testing::PollUntil([&] { return Client().Get("/health").status == 200; }));
}

TEST_F(HttpsTest, IdleAndSilentConnectionsAreClosed) {
  constexpr int kTimeoutMs = 200;
  Start([&](config::RouterConfig& router) {
    router.http_first_request_timeout_ms = kTimeoutMs;
    router.http_idle_timeout_ms = kTimeoutMs;
    router.http_read_timeout_ms = kTimeoutMs;
  });
  {
    // Never starts the handshake.
    RawConnection silent = Plain();
    bool closed = false;
    EXPECT_EQ(silent.Receive(kWait, "", &closed), "");
    EXPECT_TRUE(closed);
  }
  {
    // Completes the handshake, then sends no request.
    RawConnection idle = Tls();
    ASSERT_THAT(idle.Handshake(), IsOk());
    bool closed = false;
    EXPECT_EQ(idle.Receive(kWait, "", &closed), "");
    EXPECT_TRUE(closed);
  }
  {
    // A request head that stalls halfway: answered 408 once router.http_read_timeout_ms
    // has passed since its first byte (as over plain HTTP), and closed.
    RawConnection stalled = Tls();
    stalled.Send("GET /health HTTP/1.1\r\nHo");
    bool closed = false;
    EXPECT_THAT(stalled.Receive(kWait, "", &closed),
                ::testing::StartsWith("HTTP/1.1 408 Request Timeout"));
    EXPECT_TRUE(closed);
  }
  EXPECT_EQ(Client().Get("/health").status, 200);
}

TEST_F(HttpsTest, ShutdownIsNotHeldUpByASilentConnection) {
  Start([](config::RouterConfig& router) {
    router.http_read_timeout_ms = 600000;
    router.http_idle_timeout_ms = 600000;
  });
  RawConnection silent = Plain();  // never starts its handshake
  RawConnection idle = Tls();      // handshake done, no request
  ASSERT_THAT(idle.Handshake(), IsOk());
  const absl::Time start = absl::Now();
  router_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
}

TEST_F(HttpsTest, AClientThatStopsReadingIsCutWithoutStallingOthers) {
  Start([](config::RouterConfig& router) { router.http_write_timeout_ms = 500; });
  RawConnection stuck = Tls(/*receive_buffer=*/4096);
  const std::string body = CompletionBody("s", 1000000, /*stream=*/true);
  stuck.Send(PostHead(body.size()) + body);
  ASSERT_TRUE(lockstep::testing::PollUntil([&] { return !worker_->requests().empty(); }));
  testing::HttpResult result =
      Client().PostStream("/v1/completions", CompletionBody("other", 6, /*stream=*/true));
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(testing::SseText(result.body), testing::FakeWorker::ExpectedText("other", 6));
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(30)));
  result = Client().Post("/v1/completions", CompletionBody("after", 2));
  EXPECT_EQ(result.status, 200) << result.body;
}

TEST(HttpsConfigTest, UnreadableOrMismatchedFilesAreErrorsNamingTheField) {
  absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(::testing::TempDir());
  ASSERT_THAT(certs, IsOk());
  config::DeploymentConfig config =
      testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
  config.router.https_cert_file = certs->cert_file;
  config.router.https_key_file = certs->dir + "/missing.key";
  EXPECT_THAT(testing::StartRouter(config).status().message(),
              HasSubstr("router.https_key_file"));
  config.router.https_key_file = certs->other_key_file;
  EXPECT_THAT(testing::StartRouter(config).status().message(),
              HasSubstr("does not belong to the certificate"));
}

TEST(RouterHttpClientTest, UrlsAndBadOnes) {
  config::RouterConfig router;
  EXPECT_EQ(RouterHttpUrl(router, "127.0.0.1:80"), "http://127.0.0.1:80");
  router.https_cert_file = "cert.pem";
  EXPECT_EQ(RouterHttpUrl(router, "127.0.0.1:80"), "https://127.0.0.1:80");
  EXPECT_THAT(NewRouterHttpClient("127.0.0.1:80", ""), IsOk());
  EXPECT_THAT(NewRouterHttpClient("https://[::1]:443", ""), IsOk());
  EXPECT_THAT(NewRouterHttpClient("ftp://127.0.0.1:80", "").status().message(),
              HasSubstr("https://host:port"));
  EXPECT_FALSE(NewRouterHttpClient("https://nowhere", "").ok());
}

}  // namespace
}  // namespace lockstep::router
