#include "runtime/async_http/async_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/poll_until.h"
#include "gtest/gtest.h"
#include "runtime/testing/process_stats.h"

namespace lockstep::async_http {
namespace {

using ::lockstep::process::ThreadCount;

TEST(AsyncHttpServerTest, RefusesAnAddressItCannotListenOn) {
  AsyncHttpServer server(AsyncHttpLimits(), [](std::shared_ptr<HttpExchange>) {});
  EXPECT_EQ(server.Start("not-an-address", 0).status().code(), absl::StatusCode::kInvalidArgument);
}
// A plain TCP client: every read waits at most 30 s.
class Client {
 public:
  explicit Client(int port, int receive_buffer = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }

  void Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // Reads until `done(received)` or the peer closes; false on the 30 s deadline.
  template <class Done>
  bool ReadUntil(Done done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!done(received_)) {
      pollfd p{fd_, POLLIN, 0};
      const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (left <= 0 || poll(&p, 1, left) <= 0) return false;
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        return true;
      }
      received_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // One whole response (Content-Length or chunked), taken off what was received.
  std::string Response() {
    size_t end = 0;
    ReadUntil([&end](const std::string& r) { return (end = ResponseEnd(r)) != 0; });
    if (end == 0) end = received_.size();
    std::string response = received_.substr(0, end);
    received_.erase(0, end);
    return response;
  }
  // Everything until the server closes the connection.
  std::string UntilClosed() {
    ReadUntil([this](const std::string&) { return closed_; });
    std::string all = std::move(received_);
    received_.clear();
    return all;
  }
  bool closed() const { return closed_; }

 private:
  static size_t ResponseEnd(const std::string& r) {
    const size_t head = r.find("\r\n\r\n");
    if (head == std::string::npos) return 0;
    if (absl::StrContains(r.substr(0, head), "Transfer-Encoding: chunked")) {
      const size_t last = r.find("\r\n0\r\n\r\n", head);
      return last == std::string::npos ? 0 : last + 7;
    }
    size_t length = 0;
    if (const size_t at = r.find("Content-Length: "); at != std::string::npos && at < head) {
      if (!absl::SimpleAtoi(r.substr(at + 16, r.find("\r\n", at) - at - 16), &length)) length = 0;
    }
    return r.size() >= head + 4 + length ? head + 4 + length : 0;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

std::string Status(const std::string& response) { return response.substr(0, 12); }

std::string Body(const std::string& response) {
  const size_t head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

// Echoes "METHOD TARGET BODY".
void Echo(std::shared_ptr<HttpExchange> exchange) {
  const HttpRequest& r = exchange->request();
  exchange->Respond(200, "text/plain", r.method + " " + r.target + " " + r.body);
}

int StartOrDie(AsyncHttpServer& server) {
  absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
  EXPECT_TRUE(port.ok()) << port.status();
  return port.value_or(0);
}

AsyncHttpLimits TestLimits() {
  AsyncHttpLimits limits;
  limits.first_request_timeout = absl::Seconds(60);
  limits.idle_timeout = absl::Seconds(60);
  limits.read_timeout = absl::Seconds(60);
  limits.write_timeout = absl::Seconds(60);
  return limits;
}

TEST(AsyncHttpServerTest, ServesRequestsOnAKeepAliveConnection) {
  AsyncHttpServer server(TestLimits(), Echo);
  const int port = StartOrDie(server);
  Client client(port);
  ASSERT_TRUE(client.connected());
  client.Send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string first = client.Response();
  EXPECT_EQ(Status(first), "HTTP/1.1 200");
  EXPECT_EQ(Body(first), "GET /v1/models ");
  client.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  std::string second = client.Response();
  EXPECT_EQ(Body(second), "POST /v1/completions hello");
  // Pipelined: both answered, in order.
  client.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(Body(client.Response()), "GET /a ");
  EXPECT_EQ(Body(client.Response()), "GET /b ");
  client.Send("GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string last = client.UntilClosed();
  EXPECT_EQ(Body(last), "GET /c ");
  EXPECT_TRUE(client.closed());
}

TEST(AsyncHttpServerTest, HeadAndBodyBounds) {
  AsyncHttpLimits limits = TestLimits();
  limits.max_header_bytes = 1024;
  limits.max_header_count = 5;
  limits.max_body_bytes = 100;
  AsyncHttpServer server(limits, Echo);
  const int port = StartOrDie(server);
  auto refused = [port](const std::string& request) {
    Client client(port);
    client.Send(request);
    return client.UntilClosed();
  };
  EXPECT_EQ(Status(refused("GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n")),
            "HTTP/1.1 431");
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 6; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(Status(refused(many + "\r\n")), "HTTP/1.1 431");
  EXPECT_EQ(Status(refused("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n")), "HTTP/1.1 413");
  EXPECT_EQ(Status(refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")),
            "HTTP/1.1 411");
  EXPECT_EQ(Status(refused("POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx")),
            "HTTP/1.1 415");
  // Over the limit with Expect: 413 instead of the 100, so the body is never sent.
  const std::string expect_big =
      refused("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 500\r\n\r\n");
  EXPECT_EQ(Status(expect_big), "HTTP/1.1 413");
  EXPECT_TRUE(absl::StrContains(expect_big, "\"code\":413")) << expect_big;

  Client client(port);
  client.Send("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  client.ReadUntil([](const std::string& r) { return absl::StrContains(r, "\r\n\r\n"); });
  client.Send("ok");
  std::string after_continue = client.Response();  // the 100
  EXPECT_EQ(Status(after_continue), "HTTP/1.1 100");
  EXPECT_EQ(Body(client.Response()), "POST /x ok");
}

// A client trickling its request gets 408 at the read deadline, counted from its first
// byte; one that never sends anything is closed after the first request timeout.
TEST(AsyncHttpServerTest, SlowAndIdleClientsAreCut) {
  AsyncHttpLimits limits = TestLimits();
  limits.read_timeout = absl::Milliseconds(200);
  limits.first_request_timeout = absl::Milliseconds(200);
  limits.idle_timeout = absl::Milliseconds(200);
  AsyncHttpServer server(limits, Echo);
  const int port = StartOrDie(server);
  Client slow(port);
  slow.Send("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  const std::string timed_out = slow.UntilClosed();
  EXPECT_EQ(Status(timed_out), "HTTP/1.1 408") << timed_out;
  EXPECT_TRUE(slow.closed());
  Client idle(port);
  EXPECT_EQ(idle.UntilClosed(), "");
  EXPECT_TRUE(idle.closed());
}

// A new connection's first request is awaited for the first request timeout, not the
// idle timeout. No timing involved: on one I/O thread, timers run in deadline order, and
// `fresh` began its wait before `served` connected; so had that wait been the idle
// timeout, `fresh` would have been closed before `served` was (after its response).
TEST(AsyncHttpServerTest, AFirstRequestIsAwaitedForLongerThanTheIdleTimeout) {
  AsyncHttpLimits limits = TestLimits();
  limits.io_threads = 1;
  limits.idle_timeout = absl::Milliseconds(50);
  limits.first_request_timeout = absl::Hours(1);
  AsyncHttpServer server(limits, Echo);
  const int port = StartOrDie(server);
  Client fresh(port);
  ASSERT_TRUE(fresh.connected());
  // Accepted (its wait is queued on the I/O thread before anything `served` causes).
  ASSERT_TRUE(testing::PollUntil([&] { return server.open_connections() == 1; }));
  Client served(port);
  served.Send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(Body(served.Response()), "GET /first ");
  EXPECT_EQ(served.UntilClosed(), "");  // idle after its request: closed
  EXPECT_TRUE(served.closed());
  fresh.Send("GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string late = fresh.Response();
  EXPECT_EQ(Status(late), "HTTP/1.1 200") << late;
  EXPECT_EQ(Body(late), "GET /late ");
}

TEST(AsyncHttpServerTest, ConnectionsOverTheCapGet503) {
  AsyncHttpLimits limits = TestLimits();
  limits.max_connections = 2;
  AsyncHttpServer server(limits, Echo);
  const int port = StartOrDie(server);
  Client a(port), b(port);
  for (Client* c : {&a, &b}) {  // both admitted (each answered)
    c->Send("GET / HTTP/1.1\r\n\r\n");
    EXPECT_EQ(Status(c->Response()), "HTTP/1.1 200");
  }
  Client third(port);
  const std::string refusal = third.UntilClosed();
  EXPECT_EQ(Status(refusal), "HTTP/1.1 503") << refusal;
  EXPECT_TRUE(absl::StrContains(refusal, "Retry-After: 1")) << refusal;
  EXPECT_EQ(server.refused_connections(), 1);
  a.Close();
  b.Close();
}

// Server-sent events: the chunks arrive as written, from another thread.
TEST(AsyncHttpServerTest, StreamsChunksAsTheyAreWritten) {
  std::vector<std::thread> producers;
  absl::Mutex mu;
  AsyncHttpServer server(TestLimits(), [&](std::shared_ptr<HttpExchange> exchange) {
    absl::MutexLock lock(&mu);
    producers.emplace_back([exchange] {
      exchange->StartStream(200, "text/event-stream");
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(exchange->Write("data: " + std::to_string(i) + "\n\n"));
      exchange->End();
    });
  });
  const int port = StartOrDie(server);
  Client client(port);
  client.Send("POST /v1/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  const std::string response = client.Response();
  EXPECT_EQ(Status(response), "HTTP/1.1 200");
  EXPECT_TRUE(absl::StrContains(response, "Transfer-Encoding: chunked"));
  EXPECT_EQ(Body(response), "9\r\ndata: 0\n\n\r\n9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n");
  absl::MutexLock lock(&mu);
  for (std::thread& t : producers) t.join();
}

// Backpressure: a client that stops reading its stream is cut after the write timeout
// and its exchange aborted (the request's work is cancelled); a client that leaves
// while its response is pending aborts it too.
TEST(AsyncHttpServerTest, ClientsThatStopReadingOrLeaveAbortTheirExchange) {
  AsyncHttpLimits limits = TestLimits();
  limits.write_timeout = absl::Milliseconds(300);
  absl::Mutex mu;
  std::vector<std::shared_ptr<HttpExchange>> held;
  absl::Notification aborted_stream, aborted_pending;
  std::thread producer;
  AsyncHttpServer server(limits, [&](std::shared_ptr<HttpExchange> exchange) {
    absl::MutexLock lock(&mu);
    held.push_back(exchange);
    if (exchange->request().target == "/pending") {
      exchange->OnAbort([&] { aborted_pending.Notify(); });
      return;  // never answered
    }
    exchange->OnAbort([&] { aborted_stream.Notify(); });
    producer = std::thread([exchange] {
      exchange->StartStream(200, "text/event-stream");
      const std::string chunk(64 << 10, 'x');
      // Produce until the client's buffers are full and 8 MiB wait in the queue.
      while (exchange->pending_bytes() < (8 << 20) && exchange->Write(chunk)) {
      }
    });
  });
  const int port = StartOrDie(server);
  Client stuck(port, /*receive_buffer=*/4096);
  stuck.Send("GET /stream HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(aborted_stream.WaitForNotificationWithTimeout(absl::Seconds(60)));
  producer.join();
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(held[0]->aborted());
    EXPECT_FALSE(held[0]->Write("more"));
  }
  Client leaving(port);
  leaving.Send("GET /pending HTTP/1.1\r\n\r\n");
  // Close only once the server holds the request (the handler saw it).
  {
    absl::MutexLock lock(&mu);
    auto two = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return held.size() == 2; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&two), absl::Seconds(30)));
  }
  leaving.Close();
  EXPECT_TRUE(aborted_pending.WaitForNotificationWithTimeout(absl::Seconds(60)));
}

// Many open streams share the few I/O threads: the thread count does not grow with
// them (the kernel's count, /proc/self/task).
TEST(AsyncHttpServerTest, ManyStreamsShareAFewThreads) {
  constexpr int kStreams = 500;
  AsyncHttpLimits limits = TestLimits();
  limits.io_threads = 2;
  absl::Mutex mu;
  std::vector<std::shared_ptr<HttpExchange>> open;
  AsyncHttpServer server(limits, [&](std::shared_ptr<HttpExchange> exchange) {
    exchange->StartStream(200, "text/event-stream");
    exchange->Write("data: first\n\n");
    absl::MutexLock lock(&mu);
    open.push_back(std::move(exchange));
  });
  const int port = StartOrDie(server);
  const int before = ThreadCount();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.push_back(std::make_unique<Client>(port));
    clients.back()->Send("GET /stream HTTP/1.1\r\n\r\n");
  }
  for (auto& c : clients) {
    ASSERT_TRUE(c->ReadUntil([](const std::string& r) { return absl::StrContains(r, "first"); }));
  }
  EXPECT_EQ(server.open_connections(), kStreams);
  const int during = ThreadCount();
  EXPECT_LE(during - before, 0) << before << " threads before, " << during << " with "
                                << kStreams << " open streams";
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(open.size(), static_cast<size_t>(kStreams));
    for (auto& e : open) e->End();
  }
  for (auto& c : clients) {
    EXPECT_TRUE(absl::StrContains(c->Response(), "\r\n0\r\n\r\n"));
  }
}

// A producer that waits for the client before each write (AwaitPendingAtMost) holds
// little queued while the client does not read, and finishes once it does.
TEST(AsyncHttpServerTest, AProducerThatWaitsForItsClientHoldsLittleQueued) {
  constexpr int64_t kChunk = 64 << 10;
  constexpr int kChunks = 64;
  std::shared_ptr<HttpExchange> exchange;
  absl::Notification arrived, waited;
  AsyncHttpServer server(TestLimits(), [&](std::shared_ptr<HttpExchange> e) {
    exchange = std::move(e);
    arrived.Notify();
  });
  const int port = StartOrDie(server);
  Client client(port, /*receive_buffer=*/4096);
  client.Send("GET /stream HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(arrived.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::atomic<int64_t> written{0};
  std::thread producer([&] {
    exchange->StartStream(200, "text/event-stream");
    const std::string chunk(kChunk, 'x');
    for (int i = 0; i < kChunks; ++i) {
      if (!exchange->Write(chunk)) return;
      written.fetch_add(kChunk);
      while (!exchange->AwaitPendingAtMost(kChunk, absl::Milliseconds(50))) {
        if (!waited.HasBeenNotified()) waited.Notify();
        if (exchange->aborted()) return;
      }
    }
    exchange->End();
  });
  // The client reads nothing yet: the producer waits with at most about a chunk queued.
  ASSERT_TRUE(waited.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_LT(written.load(), kChunks * kChunk);
  EXPECT_LE(exchange->pending_bytes(), 2 * kChunk + 64);
  // Once it reads, everything arrives.
  const std::string response = client.Response();
  producer.join();
  EXPECT_EQ(written.load(), kChunks * kChunk);
  EXPECT_GT(response.size(), static_cast<size_t>(kChunks * kChunk));
  EXPECT_TRUE(absl::EndsWith(response, "\r\n0\r\n\r\n"));
}

// The same without a thread (OnPendingAtMost): each callback writes the next chunk, so
// a producer is held back by its client with nothing waiting, and goes on (on an I/O
// thread) as the client reads.
TEST(AsyncHttpServerTest, AProducerOnCallbacksHoldsLittleQueued) {
  constexpr int64_t kChunk = 64 << 10;
  constexpr int kChunks = 64;
  struct Producer {
    std::shared_ptr<HttpExchange> exchange;
    std::string chunk = std::string(kChunk, 'x');
    std::atomic<int> written{0};
    absl::Notification parked, done;
    void Next() {
      if (written.load() == kChunks) {
        exchange->End();
        done.Notify();
        return;
      }
      if (!exchange->Write(chunk)) {
        done.Notify();
        return;
      }
      written.fetch_add(1);
      if (exchange->pending_bytes() > kChunk && !parked.HasBeenNotified()) parked.Notify();
      exchange->OnPendingAtMost(kChunk, [this] {
        if (exchange->aborted()) {
          done.Notify();
          return;
        }
        Next();
      });
    }
  } producer;
  absl::Notification arrived;
  AsyncHttpServer server(TestLimits(), [&](std::shared_ptr<HttpExchange> e) {
    producer.exchange = std::move(e);
    arrived.Notify();
  });
  const int port = StartOrDie(server);
  Client client(port, /*receive_buffer=*/4096);
  client.Send("GET /stream HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(arrived.WaitForNotificationWithTimeout(absl::Seconds(30)));
  producer.exchange->StartStream(200, "text/event-stream");
  producer.Next();
  // The client reads nothing yet: the producer is parked with at most about a chunk
  // queued beyond what the socket holds.
  ASSERT_TRUE(producer.parked.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_LT(producer.written.load(), kChunks);
  EXPECT_LE(producer.exchange->pending_bytes(), 2 * kChunk + 64);
  // Once it reads, everything arrives.
  const std::string response = client.Response();
  ASSERT_TRUE(producer.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(producer.written.load(), kChunks);
  EXPECT_GT(response.size(), static_cast<size_t>(kChunks * kChunk));
  EXPECT_TRUE(absl::EndsWith(response, "\r\n0\r\n\r\n"));
}

}  // namespace
}  // namespace lockstep::async_http
