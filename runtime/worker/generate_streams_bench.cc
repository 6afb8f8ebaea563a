// Many concurrent WorkerService.Generate streams on one leader, without an engine: the
// bench plays the executor's part (one batch of responses per step, a token for every
// stream, pushed into RequestStreams as the executor thread does) and callback-API
// clients in the same process read the streams. It measures what the streaming edge
// costs: the process's threads (/proc/self/task), its RSS, the time from a step's push
// until its last stream has the token, and the CPU time per streamed token (server and
// clients together: they share the process).
//
//   bazel run //runtime/worker:generate_streams_bench -- 5000 50
//   (streams, steps)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/testing/process_stats.h"
#include "runtime/worker/request_streams.h"
#include "runtime/worker/worker_service.h"

namespace lockstep::worker {
namespace {

using ::lockstep::process::CpuSeconds;
using ::lockstep::process::RssKib;
using ::lockstep::process::ThreadCount;

// Counts what the readers received, so the bench can wait for a step's last token.
class Progress {
 public:
  void Add(int64_t n) {
    absl::MutexLock lock(&mu_);
    n_ += n;
  }
  bool WaitFor(int64_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(300));
  }

 private:
  absl::Mutex mu_;
  int64_t n_ ABSL_GUARDED_BY(mu_) = 0;
};

class Reader final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Reader(v1::WorkerService::Stub& stub, uint64_t id, Progress* opened, Progress* tokens,
         Progress* done)
      : opened_(opened), tokens_(tokens), done_(done) {
    request_.set_request_id(id);
    request_.add_prompt_token_ids(1);
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(30));
    stub.async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadInitialMetadataDone(bool) override { opened_->Add(1); }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    tokens_->Add(response_.token_ids_size());
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    if (!status.ok()) std::fprintf(stderr, "stream failed: %s\n", status.error_message().c_str());
    done_->Add(1);
  }

 private:
  Progress* const opened_;
  Progress* const tokens_;
  Progress* const done_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

int Run(int streams, int steps) {
  SystemClock clock;
  auto group = comm::MakeInProcessGroup(1);
  engine::FakeEngineOptions eo;
  eo.threaded = false;
  engine::FakeEngine engine(eo);
  exec::ExecutorConfig config;
  config.kv.target.layout = {1, 1, 1, 16};
  config.kv.target.num_blocks = 8;
  config.kv.dummy_reserved_tokens = 1;
  RequestStreams request_streams;
  exec::Executor::Deps deps;
  deps.comm = group[0].get();
  deps.engine = &engine;
  deps.kv = *kv::KvManager::Create(config.kv);
  deps.clock = &clock;
  deps.sink = &request_streams;
  std::unique_ptr<exec::Executor> executor = *exec::Executor::Create(config, std::move(deps));
  WorkerServiceOptions options;
  options.instance = "bench";
  options.clock = &clock;
  options.executor = executor.get();
  options.streams = &request_streams;
  options.health = [] { return HealthView(); };
  WorkerServiceImpl service(std::move(options));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  const int threads_idle = ThreadCount();
  const int64_t rss_idle = RssKib();
  Progress opened, tokens, done;
  std::vector<std::unique_ptr<Reader>> readers;
  readers.reserve(streams);
  for (int i = 0; i < streams; ++i) {
    readers.push_back(std::make_unique<Reader>(*stub, 1 + i, &opened, &tokens, &done));
  }
  if (!opened.WaitFor(streams)) {
    std::fprintf(stderr, "streams did not open\n");
    return 1;
  }
  const int threads_open = ThreadCount();
  const double cpu_start = CpuSeconds();
  std::vector<double> step_ms;
  for (int step = 0; step < steps; ++step) {
    std::vector<exec::Response> batch(streams);
    for (int i = 0; i < streams; ++i) {
      batch[i].id = RequestId(1 + i);
      batch[i].tokens = {step};
      batch[i].finished = step + 1 == steps;
      if (batch[i].finished) batch[i].finish_reason = sched::FinishReason::kLength;
    }
    const absl::Time pushed = absl::Now();
    request_streams.OnResponses(std::move(batch));
    if (!tokens.WaitFor(static_cast<int64_t>(streams) * (step + 1))) {
      std::fprintf(stderr, "step %d was not delivered\n", step);
      return 1;
    }
    step_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - pushed));
  }
  const double cpu = CpuSeconds() - cpu_start;
  const int threads_streaming = ThreadCount();
  const int64_t rss_streaming = RssKib();
  done.WaitFor(streams);
  std::printf(
      "streams=%d steps=%d threads idle=%d open=%d streaming=%d rss_kib idle=%lld "
      "streaming=%lld step_delivery_ms p50=%.2f p99=%.2f max=%.2f cpu_us_per_token=%.2f\n",
      streams, steps, threads_idle, threads_open, threads_streaming,
      static_cast<long long>(rss_idle), static_cast<long long>(rss_streaming),
      Percentile(step_ms, 0.5), Percentile(step_ms, 0.99), Percentile(step_ms, 1.0),
      1e6 * cpu / (static_cast<double>(streams) * steps));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace lockstep::worker

int main(int argc, char** argv) {
  const int streams = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 50;
  if (streams <= 0 || steps <= 0) {
    std::fprintf(stderr, "usage: generate_streams_bench [streams > 0] [steps > 0]\n");
    return 2;
  }
  return lockstep::worker::Run(streams, steps);
}
