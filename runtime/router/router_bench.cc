// Router overhead for a 1-token request over loopback against a fake worker (which
// answers at once, no model): through the router's HTTP API and its gRPC API, with
// the same request sent straight to the worker's gRPC Generate as the baseline.
// Reports p50 / p99 latency per request (µs) as counters.
//
//   bazel run -c opt //runtime/router:router_bench
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/host_port.h"
#include "common/log.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "proto/router.grpc.pb.h"
#include "runtime/router/testing/router_harness.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;

struct Setup {
  std::unique_ptr<RouterDaemon> router;
  std::unique_ptr<testing::FakeWorker> worker;
};

Setup& GetSetup() {
  static Setup* setup = [] {
    SetLogLevel(spdlog::level::warn);
    auto* s = new Setup;
    s->router = *testing::StartRouter(testing::TestConfig({{"agg0", InstanceRole::kAggregated}}));
    s->worker = *testing::StartWorker(*s->router, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    return s;
  }();
  return *setup;
}

// Times each iteration and reports percentiles.
class Latencies {
 public:
  void Start() { start_ = std::chrono::steady_clock::now(); }
  void Stop() {
    samples_.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
            .count());
  }
  void Report(benchmark::State& state) {
    if (samples_.empty()) return;
    std::sort(samples_.begin(), samples_.end());
    auto at = [&](double q) { return samples_[static_cast<size_t>(q * (samples_.size() - 1))]; };
    state.counters["p50_us"] = at(0.50);
    state.counters["p99_us"] = at(0.99);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::vector<double> samples_;
};

void BM_WorkerGrpcDirect(benchmark::State& state) {
  Setup& setup = GetSetup();
  auto stub = v1::WorkerService::NewStub(
      security::CreateChannel(setup.worker->address()));
  v1::GenerateRequest request;
  request.set_model(testing::kModel);
  request.add_prompt_token_ids('h');
  request.mutable_sampling()->set_max_tokens(1);
  Latencies latencies;
  uint64_t id = 1;
  for (auto _ : state) {
    latencies.Start();
    request.set_request_id(id++);
    grpc::ClientContext call;
    auto reader = stub->Generate(&call, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    if (!reader->Finish().ok()) state.SkipWithError("direct Generate failed");
    latencies.Stop();
  }
  latencies.Report(state);
}
BENCHMARK(BM_WorkerGrpcDirect)->UseRealTime();

void BM_RouterGrpc(benchmark::State& state) {
  Setup& setup = GetSetup();
  auto stub = v1::RouterService::NewStub(
      security::CreateChannel(setup.router->grpc_address()));
  v1::RouterGenerateRequest request;
  request.set_model(testing::kModel);
  request.mutable_tokens()->add_ids('h');
  request.mutable_sampling()->set_max_tokens(1);
  Latencies latencies;
  for (auto _ : state) {
    latencies.Start();
    grpc::ClientContext call;
    auto reader = stub->Generate(&call, request);
    v1::RouterGenerateResponse response;
    while (reader->Read(&response)) {
    }
    if (!reader->Finish().ok()) state.SkipWithError("router Generate failed");
    latencies.Stop();
  }
  latencies.Report(state);
}
BENCHMARK(BM_RouterGrpc)->UseRealTime();

void BM_RouterHttp(benchmark::State& state) {
  Setup& setup = GetSetup();
  const std::string& address = setup.router->http_address();
  const HostPort endpoint = ParseHostPort(address).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  const std::string body = R"({"model": "tiny", "prompt": "h", "max_tokens": 1})";
  Latencies latencies;
  for (auto _ : state) {
    latencies.Start();
    httplib::Result result = client.Post("/v1/completions", body, "application/json");
    if (!result || result->status != 200) state.SkipWithError("HTTP completion failed");
    latencies.Stop();
  }
  latencies.Report(state);
}
BENCHMARK(BM_RouterHttp)->UseRealTime();

}  // namespace
}  // namespace lockstep::router

BENCHMARK_MAIN();
