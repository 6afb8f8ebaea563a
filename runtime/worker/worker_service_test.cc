#include "runtime/worker/worker_service.h"
#include "runtime/testing/process_stats.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/intake.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/token_checked_service.h"
#include "runtime/worker/request_streams.h"

namespace lockstep::worker {
namespace {

using ::lockstep::process::ThreadCount;

// A WorkerService over an executor that never steps (the test plays its responses into
// the RequestStreams), served on a free local port behind the cluster-token wrapper.
class ServedWorker {
 public:
  explicit ServedWorker(Clock* clock, absl::Duration request_timeout = absl::Minutes(10),
                        absl::Duration cancel_grace = absl::Seconds(5)) {
    group_ = comm::MakeInProcessGroup(1);
    engine::FakeEngineOptions eo;
    eo.threaded = false;
    engine_ = std::make_unique<engine::FakeEngine>(eo);
    exec::ExecutorConfig config;
    config.kv.target.layout = {1, 1, 1, 16};
    config.kv.target.num_blocks = 8;
    config.kv.dummy_reserved_tokens = 1;
    exec::Executor::Deps deps;
    deps.comm = group_[0].get();
    deps.engine = engine_.get();
    absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config.kv);
    EXPECT_TRUE(kv.ok()) << kv.status();
    deps.kv = *std::move(kv);
    deps.clock = clock;
    deps.sink = &streams_;
    absl::StatusOr<std::unique_ptr<exec::Executor>> executor =
        exec::Executor::Create(config, std::move(deps));
    EXPECT_TRUE(executor.ok()) << executor.status();
    executor_ = *std::move(executor);

    WorkerServiceOptions options;
    options.instance = "gen0";
    options.request_timeout = request_timeout;
    options.cancel_grace = cancel_grace;
    options.clock = clock;
    options.executor = executor_.get();
    options.streams = &streams_;
    options.health = [] { return HealthView(); };
    service_ = std::make_unique<WorkerServiceImpl>(std::move(options));
    checked_ = security::RequireClusterToken<v1::WorkerService>(service_.get(),
                                                                security::ClusterSecurity{});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(checked_.get());
    server_ = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    stub_ = v1::WorkerService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~ServedWorker() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }

  RequestStreams& streams() { return streams_; }
  exec::Executor& executor() { return *executor_; }
  v1::WorkerService::Stub& stub() { return *stub_; }

 private:
  std::vector<std::unique_ptr<comm::Communicator>> group_;
  std::unique_ptr<engine::FakeEngine> engine_;
  RequestStreams streams_;
  std::unique_ptr<exec::Executor> executor_;
  std::unique_ptr<WorkerServiceImpl> service_;
  std::unique_ptr<grpc::Service> checked_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

// A count that tests wait on, with a deadline.
class Count {
 public:
  void Add() {
    absl::MutexLock lock(&mu_);
    ++n_;
  }
  bool WaitFor(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(120));
  }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

// One Generate call on gRPC's callback client API (no thread of its own either).
class StreamReader final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  StreamReader(v1::WorkerService::Stub& stub, uint64_t id, Count* opened, Count* done)
      : opened_(opened), done_(done) {
    request_.set_request_id(id);
    request_.add_prompt_token_ids(1);
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stub.async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadInitialMetadataDone(bool /*ok*/) override { opened_->Add(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    for (int32_t t : response_.token_ids()) tokens_.push_back(t);
    finished_ = response_.finished();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    status_ = status;
    done_->Add();
  }
  // Read after `done` counted this stream.
  const grpc::Status& status() const { return status_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  bool finished() const { return finished_; }

 private:
  Count* const opened_;
  Count* const done_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  std::vector<int32_t> tokens_;
  bool finished_ = false;
  grpc::Status status_;
};

exec::Response Tokens(int64_t id, std::vector<int32_t> tokens, bool finished) {
  exec::Response r;
  r.id = RequestId(id);
  r.tokens = std::move(tokens);
  r.finished = finished;
  if (finished) r.finish_reason = sched::FinishReason::kLength;
  return r;
}

// Generate's request and cancel deadlines are on the injected clock; the stream's timer
// waits the real time left and checks the clock again. With a clock a day ahead of real
// time, a wait until the clock deadline in real time would last a day: the stream must
// still time out as the injected clock moves, and cancel the request in the instance.
TEST(WorkerServiceTest, GenerateTimesOutOnTheInjectedClock) {
  FakeClock clock(absl::Now() + absl::Hours(24));
  ServedWorker worker(&clock, /*request_timeout=*/absl::ZeroDuration(),
                      /*cancel_grace=*/absl::Seconds(1));
  Count opened, done;
  // No response ever arrives (the executor never steps).
  StreamReader reader(worker.stub(), 7, &opened, &done);
  ASSERT_TRUE(opened.WaitFor(1));
  // Move the injected clock past the cancel grace, a second per 50 ms of real time.
  absl::Notification stop;
  std::thread mover([&] {
    for (int i = 0; i < 600 && !stop.WaitForNotificationWithTimeout(absl::Milliseconds(50)); ++i) {
      clock.Advance(absl::Seconds(1));
    }
  });
  const bool ended = done.WaitFor(1);
  stop.Notify();
  mover.join();
  ASSERT_TRUE(ended) << "Generate did not end as the injected clock passed its deadline";
  EXPECT_EQ(reader.status().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << reader.status().error_message();
  EXPECT_EQ(worker.streams().open_streams(), 0);

  exec::IntakeBatch batch;
  worker.executor().inbox().TakeAll(&batch);
  ASSERT_EQ(batch.requests.size(), 1u);
  EXPECT_EQ(batch.requests[0].id, RequestId(7));
  ASSERT_EQ(batch.cancels.size(), 1u);  // the timed-out request was cancelled in the instance
  EXPECT_EQ(batch.cancels[0], RequestId(7));
}

// Many concurrent streams wait on their queues, not on threads: the process's thread
// count (the kernel's, /proc/self/task) grows by far less than the number of open
// streams, and every stream still gets its tokens in order and ends OK.
TEST(WorkerServiceTest, ManyStreamsAreServedByABoundedNumberOfThreads) {
  constexpr int kStreams = 512;
  SystemClock clock;
  ServedWorker worker(&clock);
  {  // warm up the channel and gRPC's thread pools with one stream
    Count opened, done;
    StreamReader reader(worker.stub(), 1, &opened, &done);
    ASSERT_TRUE(opened.WaitFor(1));
    worker.streams().OnResponses({Tokens(1, {9}, true)});
    ASSERT_TRUE(done.WaitFor(1));
    ASSERT_TRUE(reader.status().ok()) << reader.status().error_message();
  }
  const int threads_before = ThreadCount();
  ASSERT_GT(threads_before, 0);

  Count opened, done;
  std::vector<std::unique_ptr<StreamReader>> readers;
  for (int i = 0; i < kStreams; ++i) {
    readers.push_back(std::make_unique<StreamReader>(worker.stub(), 100 + i, &opened, &done));
  }
  ASSERT_TRUE(opened.WaitFor(kStreams));
  EXPECT_EQ(worker.streams().open_streams(), kStreams);
  const int threads_open = ThreadCount();
  // A thread per stream would add kStreams; gRPC's pools stay at a few per core.
  const int bound = 16 + 2 * static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_LT(threads_open - threads_before, bound)
      << threads_before << " threads before, " << threads_open << " with " << kStreams
      << " open streams";

  for (int i = 0; i < kStreams; ++i) {
    worker.streams().OnResponses({Tokens(100 + i, {i, i + 1}, false)});
  }
  for (int i = 0; i < kStreams; ++i) {
    worker.streams().OnResponses({Tokens(100 + i, {i + 2}, true)});
  }
  ASSERT_TRUE(done.WaitFor(kStreams));
  for (int i = 0; i < kStreams; ++i) {
    const StreamReader& r = *readers[i];
    ASSERT_TRUE(r.status().ok()) << "stream " << i << ": " << r.status().error_message();
    EXPECT_TRUE(r.finished()) << "stream " << i;
    EXPECT_EQ(r.tokens(), (std::vector<int32_t>{i, i + 1, i + 2})) << "stream " << i;
  }
  EXPECT_EQ(worker.streams().open_streams(), 0);
}

// A refused request ends its stream with the refusal and opens nothing.
TEST(WorkerServiceTest, DuplicateRequestIsRefused) {
  SystemClock clock;
  ServedWorker worker(&clock);
  Count opened, done;
  StreamReader first(worker.stub(), 5, &opened, &done);
  ASSERT_TRUE(opened.WaitFor(1));
  StreamReader second(worker.stub(), 5, &opened, &done);
  ASSERT_TRUE(done.WaitFor(1));
  EXPECT_EQ(second.status().error_code(), grpc::StatusCode::ALREADY_EXISTS)
      << second.status().error_message();
  worker.streams().OnResponses({Tokens(5, {1}, true)});
  ASSERT_TRUE(done.WaitFor(2));
  EXPECT_TRUE(first.status().ok()) << first.status().error_message();
  EXPECT_EQ(first.tokens(), std::vector<int32_t>{1});
}

}  // namespace
}  // namespace lockstep::worker
