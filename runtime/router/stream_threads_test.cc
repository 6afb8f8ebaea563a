// The router's threads do not follow the streams in flight: with many SSE streams open
// and each held at a worker after its first token, the process has as many threads as
// with a few. The worker here is a gRPC callback server, so that a held stream holds no
// thread on its side either; the count is taken once every stream is held (a state, not
// a moment), so it does not depend on timing.
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fmt/format.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/router/testing/router_harness.h"
#include "runtime/testing/process_stats.h"

namespace lockstep::router {
namespace {

using ::lockstep::process::ThreadCount;

// A worker whose streams send one token and then wait, on no thread, until Release
// (then they finish with a second token) or until the router cancels them.
class HoldingWorker final : public v1::WorkerService::CallbackService {
 public:
  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::GenerateRequest*) override {
    auto stream = std::make_unique<Stream>(this);
    Stream* reactor = stream.get();
    {
      absl::MutexLock lock(&mu_);
      ++open_;
      streams_.push_back(std::move(stream));
    }
    reactor->Begin();
    return reactor;
  }
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context, const v1::HealthRequest*,
                                   v1::HealthResponse* response) override {
    response->set_state(v1::HealthResponse::STATE_SERVING);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Waits (bounded) until `n` streams sent their first token and wait.
  bool AwaitHeld(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return held_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  // Lets every held stream finish.
  void Release() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<Stream*> streams;
    {
      absl::MutexLock lock(&mu_);
      for (auto& stream : streams_) streams.push_back(stream.get());
    }
    // Outside the lock: a write's reactions may run on this thread.
    for (Stream* stream : streams) stream->Release();
  }
  // Waits (bounded) until no stream is open.
  bool AwaitNoStreams(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const auto none = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return open_ == 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
  }

 private:
  // Owned by the worker (kept until it is destroyed, after its server), so Release may
  // reach a stream that already ended. Finish is called with no write in flight.
  class Stream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
   public:
    explicit Stream(HoldingWorker* worker) : worker_(worker) { response_.add_token_ids('a'); }
    void Begin() ABSL_LOCKS_EXCLUDED(mu_) {
      {
        absl::MutexLock lock(&mu_);
        writing_ = true;
      }
      StartWrite(&response_);
    }
    void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
      bool held = false;
      {
        absl::MutexLock lock(&mu_);
        writing_ = false;
        if (!ok || cancelled_ || released_) {
          FinishLocked(ok && released_ ? grpc::Status::OK : grpc::Status::CANCELLED);
        } else {
          held = true;
          first_sent_ = true;
        }
      }
      if (held) worker_->Held();
    }
    void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!writing_) FinishLocked(grpc::Status::CANCELLED);
    }
    void OnDone() override { worker_->Closed(); }
    // The second and last token.
    void Release() ABSL_LOCKS_EXCLUDED(mu_) {
      {
        absl::MutexLock lock(&mu_);
        if (finishing_ || !first_sent_ || released_) return;
        released_ = true;
        writing_ = true;
        response_.set_finished(true);
        response_.set_finish_reason(v1::FINISH_REASON_LENGTH);
      }
      StartWrite(&response_);
    }

   private:
    void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (finishing_) return;
      finishing_ = true;
      Finish(status);
    }
    HoldingWorker* const worker_;
    absl::Mutex mu_;
    v1::GenerateResponse response_;
    bool writing_ ABSL_GUARDED_BY(mu_) = false;
    bool first_sent_ ABSL_GUARDED_BY(mu_) = false;
    bool released_ ABSL_GUARDED_BY(mu_) = false;
    bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
    bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  };

  void Held() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++held_;
  }
  void Closed() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    --open_;
  }

  absl::Mutex mu_;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

// An SSE client on a plain socket: the test opens many without a thread each.
class RawStream {
 public:
  explicit RawStream(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    const std::string body = fmt::format(
        R"({{"model":"{}","prompt":"hi","max_tokens":2,"stream":true}})", testing::kModel);
    const std::string request = fmt::format(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        body.size(), body);
    connected_ = connected_ && send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
                                   static_cast<ssize_t>(request.size());
  }
  ~RawStream() { close(fd_); }
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;

  // Reads (bounded) until the response holds `text`.
  bool AwaitText(const std::string& text, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (connected_ && received_.find(text) == std::string::npos) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(fd_, buffer, sizeof(buffer));
      if (n <= 0) return false;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return connected_;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

class StreamThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&worker_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    config::DeploymentConfig config =
        testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    // The test sends no heartbeats: the instance stays registered for the whole test.
    config.router.heartbeat_timeout_ms = 600'000;
    config.router.http_threads = 2;
    config.router.max_concurrent_requests = 1000;
    config.router.max_connections = 1000;
    config.router.grpc_max_threads = 1100;
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
    auto stub = v1::RouterService::NewStub(
        grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
    v1::RegisterRequest request;
    request.set_instance("agg0");
    request.set_role(v1::INSTANCE_ROLE_AGGREGATED);
    request.set_world_size(1);
    request.set_leader_address("127.0.0.1:" + std::to_string(port));
    request.set_model(testing::kModel);
    v1::RegisterResponse response;
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ASSERT_TRUE(stub->Register(&call, request, &response).ok());
  }
  void TearDown() override {
    streams_.clear();  // the router sees its clients gone and cancels what is left
    EXPECT_TRUE(worker_.AwaitNoStreams(absl::Seconds(20)));
    router_.reset();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // Opens `n` more streams and waits until all open ones are held after a first token.
  void OpenHeld(int n) {
    const std::string& address = router_->http_address();
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    for (int i = 0; i < n; ++i) streams_.push_back(std::make_unique<RawStream>(port));
    ASSERT_TRUE(worker_.AwaitHeld(static_cast<int>(streams_.size()), absl::Seconds(60)));
    for (auto& stream : streams_) {
      ASSERT_TRUE(stream->AwaitText("data: ", absl::Seconds(20))) << stream->received();
    }
  }

  HoldingWorker worker_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RouterDaemon> router_;
  std::vector<std::unique_ptr<RawStream>> streams_;
};

TEST_F(StreamThreadsTest, ThreadsDoNotGrowWithStreamsInFlight) {
  constexpr int kFew = 8;
  constexpr int kMany = 200;
  OpenHeld(kFew);
  const int with_few = ThreadCount();
  OpenHeld(kMany - kFew);
  const int with_many = ThreadCount();
  RecordProperty("threads_with_few", with_few);
  RecordProperty("threads_with_many", with_many);
  // A thread per stream would add 192; gRPC's and the server's pools are fixed.
  EXPECT_LT(with_many - with_few, 16) << with_few << " threads with " << kFew << " streams, "
                                      << with_many << " with " << kMany;
  worker_.Release();
  for (auto& stream : streams_) {
    EXPECT_TRUE(stream->AwaitText("data: [DONE]", absl::Seconds(20))) << stream->received();
  }
}

}  // namespace
}  // namespace lockstep::router
