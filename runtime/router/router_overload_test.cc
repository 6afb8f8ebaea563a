// router.max_queued_requests over real HTTP and gRPC against fake workers (docs/
// security.md §5): with every healthy instance of the role a request needs at the limit,
// the request is refused at once (HTTP 429 with Retry-After, gRPC RESOURCE_EXHAUSTED,
// counted in lockstep_router_refusals_total{reason="max_queued_requests"}) and reaches
// no worker; the admitted ones complete; what the router holds never exceeds the limit.
// Also router.max_concurrent_requests with n choices (each counts; a choice's thread
// the system refuses is a 503), and the gRPC server's bounded threads with the reserve
// that keeps heartbeats served while generation calls hold every place.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "proto/router.grpc.pb.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/config/role_wire.h"
#include "runtime/router/http/choice_threads.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int kMaxTokens = 3;

// How one client request ended.
struct Outcome {
  bool grpc = false;
  int http_status = 0;  // HTTP
  std::string retry_after;
  grpc::StatusCode grpc_code = grpc::StatusCode::UNKNOWN;  // gRPC
  std::string message;  // the error message
  std::string text;     // what was generated (choice 0)
  size_t choices = 0;   // HTTP, not streaming
  std::string prompt;
};

class RouterOverloadTest : public ::testing::Test {
 protected:
  void Start(const std::vector<std::pair<std::string, config::InstanceRole>>& instances,
             int64_t max_queued_requests, int64_t grpc_max_threads = 0,
             int64_t heartbeat_timeout_ms = 0) {
    StartWith(instances, [&](config::RouterConfig& router, RouterDaemon::Options&) {
      router.max_queued_requests = max_queued_requests;
      if (grpc_max_threads > 0) router.grpc_max_threads = grpc_max_threads;
      if (heartbeat_timeout_ms > 0) router.heartbeat_timeout_ms = heartbeat_timeout_ms;
    });
  }

  // Starts the router of testing::StartRouter with `adjust`ed config and options.
  void StartWith(
      const std::vector<std::pair<std::string, config::InstanceRole>>& instances,
      const std::function<void(config::RouterConfig&, RouterDaemon::Options&)>& adjust) {
    config::DeploymentConfig config = testing::TestConfig(instances);
    RouterDaemon::Options options;
    options.tokenizer = *tok::ByteTokenizer::Create(300, 256, 257);
    options.sweep_interval = absl::Milliseconds(20);
    options.keepalive_interval = absl::Milliseconds(50);
    adjust(config.router, options);
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router =
        RouterDaemon::Start(config, std::move(options));
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    for (const auto& [name, role] : instances) {
      absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
          testing::StartWorker(*router_, name, config::RoleToWire(role));
      ASSERT_THAT(worker, IsOk());
      workers_.push_back(*std::move(worker));
    }
  }

  Outcome Http(const std::string& prompt, bool stream = false, int n = 1) {
    const HostPort address = ParseHostPort(router_->http_address()).value();
    httplib::Client client(address.host, address.port);
    client.set_read_timeout(30, 0);
    const std::string body =
        absl::StrCat(R"({"model":")", testing::kModel, R"(","prompt":")", prompt,
                     R"(","max_tokens":)", kMaxTokens, R"(,"n":)", n,
                     stream ? R"(,"stream":true})" : "}");
    Outcome out{.prompt = prompt};
    httplib::Result result = client.Post("/v1/completions", body, "application/json");
    if (!result) return out;
    out.http_status = result->status;
    out.retry_after = result->get_header_value("Retry-After");
    const nlohmann::json json = nlohmann::json::parse(result->body, nullptr, false);
    if (result->status == 200 && !stream) {
      out.text = json["choices"][0]["text"].get<std::string>();
      out.choices = json["choices"].size();
    } else if (json.is_object() && json.contains("error")) {
      out.message = json["error"]["message"].get<std::string>();
    }
    return out;
  }

  Outcome Grpc(const std::string& prompt) {
    auto stub = v1::RouterService::NewStub(
        grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
    v1::RouterGenerateRequest request;
    request.set_model(testing::kModel);
    request.set_text(prompt);
    request.mutable_sampling()->set_max_tokens(kMaxTokens);
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = stub->Generate(&call, request);
    Outcome out{.grpc = true, .prompt = prompt};
    v1::RouterGenerateResponse response;
    while (reader->Read(&response)) out.text += response.text();
    const grpc::Status status = reader->Finish();
    out.grpc_code = status.error_code();
    out.message = status.error_message();
    return out;
  }

  int64_t InFlight(const std::string& instance) {
    for (const InstanceState& state : router_->registry().Snapshot()) {
      if (state.name == instance) return state.in_flight;
    }
    return -1;
  }

  size_t WorkerRequests() {
    size_t n = 0;
    for (const auto& worker : workers_) n += worker->requests().size();
    return n;
  }

  std::unique_ptr<RouterDaemon> router_;
  std::vector<std::unique_ptr<testing::FakeWorker>> workers_;
};

bool Refused(const Outcome& out) {
  return out.grpc ? out.grpc_code == grpc::StatusCode::RESOURCE_EXHAUSTED
                  : out.http_status == 429 && out.retry_after == "1";
}

bool Completed(const Outcome& out) {
  return (out.grpc ? out.grpc_code == grpc::StatusCode::OK : out.http_status == 200) &&
         out.text == testing::FakeWorker::ExpectedText(out.prompt, kMaxTokens);
}

// 10x the router's queue (2 instances x max_queued_requests 2) in concurrent requests,
// HTTP and gRPC: exactly the queue's worth is admitted, the rest is refused at once
// (while the admitted ones are still held at the workers), and once released the
// admitted ones complete. A sampler checks the router never holds more than the limit at
// an instance.
TEST_F(RouterOverloadTest, TenTimesTheQueueGetsTheExcessRefusedAndTheAdmittedComplete) {
  constexpr int kLimit = 2;
  constexpr int kQueue = 2 * kLimit;
  constexpr int kRequests = 10 * kQueue;
  Start({{"agg0", config::InstanceRole::kAggregated}, {"agg1", config::InstanceRole::kAggregated}},
        kLimit);
  for (auto& worker : workers_) worker->SetHold(true);

  // Samples every millisecond, waiting on the notification in between (no busy loop).
  std::atomic<int64_t> max_in_flight{0};
  absl::Notification stop_sampling;
  std::thread sampler([&] {
    do {
      for (const InstanceState& state : router_->registry().Snapshot()) {
        int64_t seen = max_in_flight.load();
        while (state.in_flight > seen && !max_in_flight.compare_exchange_weak(seen, state.in_flight)) {
        }
      }
    } while (!stop_sampling.WaitForNotificationWithTimeout(absl::Milliseconds(1)));
  });

  absl::Mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      const std::string prompt = absl::StrCat("q", i);
      Outcome out = i % 2 == 0 ? Http(prompt) : Grpc(prompt);
      absl::MutexLock lock(&mu);
      outcomes.push_back(std::move(out));
    });
  }
  // The excess is answered while the admitted requests are still held.
  auto held = [&] { return workers_[0]->held() + workers_[1]->held(); };
  const bool answered = PollUntil([&] {
    absl::MutexLock lock(&mu);
    return outcomes.size() == static_cast<size_t>(kRequests - kQueue) && held() == kQueue;
  });
  EXPECT_TRUE(answered) << "held " << held();
  {
    absl::MutexLock lock(&mu);
    for (const Outcome& out : outcomes) {
      EXPECT_TRUE(Refused(out)) << out.prompt << ": HTTP " << out.http_status << " gRPC "
                                << out.grpc_code << " " << out.message;
      EXPECT_THAT(out.message, HasSubstr("router.max_queued_requests"));
    }
  }
  EXPECT_EQ(router_->metrics().RefusalCount("max_queued_requests"), kRequests - kQueue);
  EXPECT_EQ(router_->metrics().RequestCount("refused"), kRequests - kQueue);
  EXPECT_EQ(WorkerRequests(), static_cast<size_t>(kQueue));  // no refused one reached a worker
  EXPECT_EQ(InFlight("agg0"), kLimit);
  EXPECT_EQ(InFlight("agg1"), kLimit);
  EXPECT_EQ(router_->flows().size(), static_cast<size_t>(kQueue));  // the refused left nothing

  for (auto& worker : workers_) worker->SetHold(false);
  for (std::thread& client : clients) client.join();
  stop_sampling.Notify();
  sampler.join();
  int completed = 0;
  for (const Outcome& out : outcomes) completed += Completed(out);
  EXPECT_EQ(completed, kQueue);
  EXPECT_LE(max_in_flight.load(), kLimit);
  EXPECT_EQ(InFlight("agg0"), 0);
  EXPECT_EQ(InFlight("agg1"), 0);
  // The places are free again.
  EXPECT_TRUE(Completed(Http("after")));
}

// A two-leg request needs a context and a generation instance: with either role full it
// is refused before it reaches any worker (no prefill is spent on a request whose decode
// has no place).
TEST_F(RouterOverloadTest, ATwoLegRequestIsRefusedWhenEitherRoleIsFull) {
  Start({{"ctx0", config::InstanceRole::kContext}, {"gen0", config::InstanceRole::kGeneration}},
        1);
  testing::FakeWorker& ctx = *workers_[0];
  testing::FakeWorker& gen = *workers_[1];
  // The generation role full: A's decode is held.
  gen.SetHold(true);
  std::thread a([&] { EXPECT_TRUE(Completed(Grpc("a"))); });
  ASSERT_TRUE(gen.AwaitHeld(1, absl::Seconds(10)));
  Outcome b = Http("b");
  EXPECT_EQ(b.http_status, 429);
  EXPECT_EQ(b.retry_after, "1");
  EXPECT_THAT(b.message, HasSubstr("every healthy generation instance has 1 requests"));
  EXPECT_EQ(ctx.requests().size(), 1u);  // A's context leg only
  gen.SetHold(false);
  a.join();
  // The context role full: C's prefill is held.
  ctx.SetHold(true);
  std::thread c([&] { EXPECT_TRUE(Completed(Http("c"))); });
  ASSERT_TRUE(ctx.AwaitHeld(1, absl::Seconds(10)));
  Outcome d = Grpc("d");
  EXPECT_EQ(d.grpc_code, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(d.message, HasSubstr("every healthy context instance"));
  EXPECT_EQ(ctx.requests().size(), 2u);
  ctx.SetHold(false);
  c.join();
  EXPECT_EQ(router_->metrics().RefusalCount("max_queued_requests"), 2);
}

// A stream beyond the limit is refused before its response starts: a 429 with an OpenAI
// error, not a 200 stream.
TEST_F(RouterOverloadTest, AStreamIsRefusedBeforeItsResponseStarts) {
  Start({{"agg0", config::InstanceRole::kAggregated}}, 1);
  workers_[0]->SetHold(true);
  std::thread held([&] { EXPECT_EQ(Http("held", /*stream=*/true).http_status, 200); });
  ASSERT_TRUE(workers_[0]->AwaitHeld(1, absl::Seconds(10)));
  Outcome refused = Http("more", /*stream=*/true);
  EXPECT_EQ(refused.http_status, 429);
  EXPECT_EQ(refused.retry_after, "1");
  EXPECT_THAT(refused.message, HasSubstr("router.max_queued_requests"));
  workers_[0]->SetHold(false);
  held.join();
}

// The router's gRPC server runs at most router.grpc_max_threads threads: a burst of calls
// that hold their thread (rendezvous Waits on a key nobody sets) gets the excess refused
// with RESOURCE_EXHAUSTED, not queued and not each given a thread; once the held calls
// end the router serves again.
TEST_F(RouterOverloadTest, TheGrpcServerRunsBoundedThreads) {
  constexpr int kThreads = 16;
  constexpr int kCalls = 3 * kThreads;
  // The burst holds every thread for 2 s, so the worker's heartbeats are refused too: a
  // heartbeat timeout longer than the burst keeps the instance healthy for the request
  // after it (with the default it was marked unhealthy mid-burst).
  Start({{"agg0", config::InstanceRole::kAggregated}}, 0, kThreads, 60'000);
  std::atomic<int> refused{0};
  std::atomic<int> waited{0};
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&] {
      std::unique_ptr<comm::RendezvousClient> client =
          comm::RendezvousClient::Connect(router_->grpc_address(), "burst");
      const absl::Status status = client->Wait({"never"}, absl::Seconds(2));
      if (absl::IsResourceExhausted(status)) refused.fetch_add(1);
      if (absl::IsDeadlineExceeded(status)) waited.fetch_add(1);
    });
  }
  for (std::thread& call : calls) call.join();
  SCOPED_TRACE(absl::StrCat(refused.load(), " refused, ", waited.load(), " waited"));
  EXPECT_EQ(refused.load() + waited.load(), kCalls);
  EXPECT_LT(waited.load(), kThreads);  // pollers take threads too
  EXPECT_GE(refused.load(), kCalls - kThreads);
  // The threads are back: membership and rendezvous calls are served.
  std::unique_ptr<comm::RendezvousClient> member =
      comm::RendezvousClient::Connect(router_->grpc_address(), "burst");
  EXPECT_TRUE(PollUntil([&] { return member->Set("later", "1").ok(); }));
  EXPECT_TRUE(Completed(Grpc("after")));
}

// Each of a request's n choices counts against router.max_concurrent_requests (one
// ticket used to cover up to 128 choices): with 3 places, a held request for n = 2
// leaves one, so another n = 2 is refused (429) while an n = 1 is admitted; n above the
// limit can never be admitted and is a 400.
TEST_F(RouterOverloadTest, EachChoiceCountsAgainstMaxConcurrentRequests) {
  StartWith({{"agg0", config::InstanceRole::kAggregated}},
            [](config::RouterConfig& router, RouterDaemon::Options&) {
              router.max_concurrent_requests = 3;
            });
  testing::FakeWorker& worker = *workers_[0];
  worker.SetHold(true);
  Outcome two;
  std::thread a([&] { two = Http("a", /*stream=*/false, /*n=*/2); });
  EXPECT_TRUE(worker.AwaitHeld(2, absl::Seconds(10)));
  Outcome refused = Http("b", /*stream=*/true, /*n=*/2);
  EXPECT_EQ(refused.http_status, 429);
  EXPECT_EQ(refused.retry_after, "1");
  EXPECT_THAT(refused.message, HasSubstr("router.max_concurrent_requests"));
  Outcome one;
  std::thread c([&] { one = Http("c"); });
  EXPECT_TRUE(worker.AwaitHeld(3, absl::Seconds(10)));
  EXPECT_EQ(Http("d").http_status, 429);
  EXPECT_EQ(worker.requests().size(), 3u);  // no refused choice reached the worker
  worker.SetHold(false);
  a.join();
  c.join();
  EXPECT_TRUE(Completed(two));
  EXPECT_EQ(two.choices, 2u);
  EXPECT_TRUE(Completed(one));
  EXPECT_EQ(router_->metrics().RefusalCount("max_concurrent_requests"), 2);

  const Outcome too_many = Http("e", /*stream=*/false, /*n=*/4);
  EXPECT_EQ(too_many.http_status, 400);
  EXPECT_THAT(too_many.message, HasSubstr("n = 4"));
  EXPECT_TRUE(Completed(Http("f", /*stream=*/false, /*n=*/3)));
}

// A thread for a choice that the system refuses (here injected: EAGAIN) fails the
// request with 503 before any choice reaches a worker, streaming or not, and the router
// serves on (it used to throw from std::thread and terminate).
TEST_F(RouterOverloadTest, AChoiceThreadTheSystemRefusesIs503) {
  std::atomic<bool> refuse{true};
  StartWith({{"agg0", config::InstanceRole::kAggregated}},
            [&](config::RouterConfig&, RouterDaemon::Options& options) {
              options.start_thread = [&](std::function<void()> body) -> absl::StatusOr<std::thread> {
                if (refuse.load()) return absl::UnavailableError("Resource temporarily unavailable");
                return StartThread(std::move(body));
              };
            });
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "not streaming");
    const Outcome out = Http("x", stream, /*n=*/3);
    EXPECT_EQ(out.http_status, 503);
    EXPECT_THAT(out.message, HasSubstr("cannot start a thread for choice 1 of 3"));
  }
  EXPECT_TRUE(workers_[0]->requests().empty());
  EXPECT_TRUE(Completed(Http("one")));  // one choice needs no thread
  refuse.store(false);
  const Outcome three = Http("three", /*stream=*/false, /*n=*/3);
  EXPECT_TRUE(Completed(three));
  EXPECT_EQ(three.choices, 3u);
}

// With router.max_concurrent_requests left at 0, generation requests still leave the
// gRPC reserve free: at most grpc_max_threads - 16 are admitted (docs/security.md §5), so
// while generation calls hold every place they may, the excess is refused by admission,
// and heartbeats, registrations and rendezvous calls get a thread.
TEST_F(RouterOverloadTest, HeartbeatsGetThroughWhileGenerationCallsSaturateTheGrpcPool) {
  constexpr int kThreads = 24;
  constexpr int kPlaces = kThreads - config::kRouterGrpcReservedThreads;
  constexpr int kCalls = kThreads + 8;
  // A heartbeat timeout past the test: the instance's health does not depend on when the
  // fake worker's own heartbeats run; the test sends its own.
  Start({{"agg0", config::InstanceRole::kAggregated}}, 0, kThreads, 60'000);
  testing::FakeWorker& worker = *workers_[0];
  worker.SetHold(true);
  absl::Mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] {
      Outcome out = Grpc(absl::StrCat("g", i));
      absl::MutexLock lock(&mu);
      outcomes.push_back(std::move(out));
    });
  }
  // Every call is held at the worker or answered.
  const bool settled = PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return outcomes.size() + worker.held() == static_cast<size_t>(kCalls);
      },
      absl::Seconds(30));
  EXPECT_TRUE(settled) << "held " << worker.held();
  EXPECT_EQ(worker.held(), kPlaces);
  {
    absl::MutexLock lock(&mu);
    for (const Outcome& out : outcomes) {
      EXPECT_EQ(out.grpc_code, grpc::StatusCode::RESOURCE_EXHAUSTED) << out.message;
      // The router's own refusal, or gRPC's when a burst finds every server thread busy
      // for a moment (the threads answering earlier refusals not yet back on a loaded
      // machine): a refusal either way, and the calls held stay at kPlaces.
      EXPECT_THAT(out.message, AnyOf(HasSubstr("router.grpc_max_threads - 16"),
                                     HasSubstr("Server Threadpool Exhausted")));
    }
  }
  for (int i = 0; i < 3 * kThreads; ++i) {
    const absl::StatusOr<bool> beat = worker.Heartbeat(router_->grpc_address());
    EXPECT_TRUE(beat.ok()) << "heartbeat " << i << ": " << beat.status();
    if (!beat.ok()) break;
  }
  EXPECT_THAT(worker.Register(router_->grpc_address()), IsOk());
  std::unique_ptr<comm::RendezvousClient> member =
      comm::RendezvousClient::Connect(router_->grpc_address(), "reserve");
  EXPECT_THAT(member->Set("key", "1"), IsOk());

  worker.SetHold(false);
  for (std::thread& call : calls) call.join();
  int completed = 0;
  for (const Outcome& out : outcomes) completed += Completed(out);
  EXPECT_EQ(completed, kPlaces);
}

}  // namespace
}  // namespace lockstep::router
