// GPU check: a worker with `engine: cuda` serves end to end. One aggregated rank on
// device 0 with a tiny model made by make-model, its KV pool in device memory sized by
// `kv.num_blocks: auto`, serves 20 Generate requests (4 clients at once, so steps batch)
// over its WorkerService, in bf16 with n-gram speculation and CUDA graphs, and in f32
// with the draft model; every request streams exactly its max_tokens tokens and ends by
// length. Skips without a GPU (runtime/cuda/gpu_test_env.h).
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/config/config_yaml.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;

constexpr int kRequests = 20;
constexpr int kClients = 4;
constexpr int kMaxTokens = 12;

// One client's requests; the number that finished as asked.
int Serve(const std::string& address, int client) {
  auto stub =
      v1::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  int good = 0;
  for (int i = client; i < kRequests; i += kClients) {
    v1::GenerateRequest request;
    request.set_request_id(100 + i);
    request.set_model("tiny");
    request.set_type(v1::REQUEST_TYPE_AGGREGATED);
    for (int t = 0; t < 10 + 3 * i; ++t) request.add_prompt_token_ids(33 + (t * 7 + i) % 90);
    request.mutable_sampling()->set_max_tokens(kMaxTokens);
    request.mutable_sampling()->set_ignore_eos(true);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub->Generate(&context, request);
    int tokens = 0;
    v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
    std::string error;
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      tokens += response.token_ids_size();
      if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        reason = response.finish_reason();
        error = response.error_message();
      }
    }
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << "request " << i << ": " << status.error_message();
    EXPECT_EQ(reason, v1::FINISH_REASON_LENGTH) << "request " << i << ": " << error;
    EXPECT_EQ(tokens, kMaxTokens) << "request " << i;
    if (status.ok() && reason == v1::FINISH_REASON_LENGTH && tokens == kMaxTokens) ++good;
  }
  return good;
}

absl::StatusOr<config::DeploymentConfig> Deployment(const std::string& instance_fields) {
  const std::string dir = engine::testing::PresetModelDir("tiny");
  return config::ParseDeploymentConfig(
      absl::StrCat("model: {name: tiny, path: ", dir, ", draft_path: ", dir, "/draft}\n",
                   "instances:\n  - {name: gpu0, role: aggregated, engine: cuda, ",
                   instance_fields, "}\n"),
      "");
}

// The deployment is checked here with or without a GPU; the serving needs one.
void ServeTwenty(const std::string& instance_fields) {
  SCOPED_TRACE(instance_fields);
  absl::StatusOr<config::DeploymentConfig> deployment = Deployment(instance_fields);
  ASSERT_THAT(deployment, IsOk());
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> rendezvous =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(rendezvous, IsOk());
  WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = "gpu0";
  options.rendezvous_address = (*rendezvous)->address();
  options.register_with_router = false;
  options.bootstrap_timeout = absl::Seconds(60);
  options.device = 0;
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(std::move(options));
  ASSERT_THAT(worker, IsOk());
  absl::Status outcome;
  std::thread loop([&] { outcome = (*worker)->Run(); });
  std::vector<int> good(kClients, 0);
  {
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] { good[c] = Serve((*worker)->service_address(), c); });
    }
    for (std::thread& t : clients) t.join();
  }
  (*worker)->RequestStop();
  loop.join();
  EXPECT_THAT(outcome, IsOk());
  int served = 0;
  for (int g : good) served += g;
  std::cout << "[" << instance_fields << "] " << served << "/" << kRequests << " served\n";
  EXPECT_EQ(served, kRequests);
}

TEST(WorkerCudaServingTest, Bf16WithNgramSpeculationAndGraphs) {
  ServeTwenty(
      "executor: {max_batch_size: 8, max_num_tokens: 256, max_num_active_requests: 16}, "
      "kv: {tokens_per_block: 16, num_blocks: auto}, "
      "speculative: {method: ngram, num_draft_tokens: 3}, cuda: {dtype: bf16}");
}

TEST(WorkerCudaServingTest, F32WithTheDraftModel) {
  ServeTwenty(
      "kv: {tokens_per_block: 16, num_blocks: 512, draft_num_blocks: 512}, "
      "executor: {max_batch_size: 8, max_num_tokens: 256, max_num_active_requests: 16, "
      "draft_pool: paired}, "
      "speculative: {method: draft_model, num_draft_tokens: 2}, "
      "cuda: {dtype: f32, batch_invariant: true}");
}

}  // namespace
}  // namespace lockstep::worker
