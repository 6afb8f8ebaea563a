// GPU check: a worker with `engine: cuda` serves MTP speculative decoding end to end.
// make-model's tiny-dsv3-mtp (a DeepSeek-V3-family target with one multi-token-prediction
// layer) on one aggregated rank, the MTP layer's KV in a paired draft pool in device
// memory, f32 with batch-invariant GEMMs and CUDA graphs: 16 greedy Generate requests
// from 4 clients at once (so steps batch, sequences of different lengths verify
// different numbers of drafts and finished requests' blocks go to new ones) over its
// WorkerService. Every request's tokens equal what a worker with `engine: cpu` and no
// speculation serves for it, and the drafts were MTP's and some were accepted. The
// deployment's model has a draft_path (for instances drafting with method draft_model):
// the MTP instance leaves it alone.
// Skips without a GPU (runtime/cuda/gpu_test_env.h); runs on the CPU execution layer.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

constexpr int kRequests = 16;
constexpr int kClients = 4;

// What one instance served: each request's tokens, and the drafts over all requests.
struct Served {
  std::vector<std::vector<int32_t>> tokens = std::vector<std::vector<int32_t>>(kRequests);
  std::vector<std::string> errors = std::vector<std::string>(kRequests);
  int64_t proposed = 0;
  int64_t accepted = 0;
  std::vector<std::string> methods = std::vector<std::string>(kRequests);
};

v1::GenerateRequest Request(int i) {
  v1::GenerateRequest request;
  request.set_request_id(200 + i);
  request.set_model("tiny-dsv3-mtp");
  request.set_type(v1::REQUEST_TYPE_AGGREGATED);
  const int length = 5 + (i * 11) % 56;
  for (int t = 0; t < length; ++t) request.add_prompt_token_ids(33 + (t * 7 + 3 * i) % 90);
  request.mutable_sampling()->set_max_tokens(6 + (i * 5) % 15);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;  // temperature 0: greedy
}

// Client `client`'s requests into `served` (each request's own slots; the draft sums
// under `mu`).
void ServeClient(const std::string& address, int client, Served& served, absl::Mutex& mu) {
  auto stub =
      v1::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  for (int i = client; i < kRequests; i += kClients) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub->Generate(&context, Request(i));
    v1::GenerateResponse response;
    v1::DraftTokens drafts;  // cumulative on every response: the last one is the total
    while (reader->Read(&response)) {
      served.tokens[i].insert(served.tokens[i].end(), response.token_ids().begin(),
                              response.token_ids().end());
      if (!response.error_message().empty()) served.errors[i] = response.error_message();
      if (response.has_drafts()) drafts = response.drafts();
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) served.errors[i] = status.error_message();
    served.methods[i] = drafts.method();
    absl::MutexLock lock(&mu);
    served.proposed += drafts.proposed();
    served.accepted += drafts.accepted();
  }
}

absl::StatusOr<config::DeploymentConfig> Deployment(const std::string& model_extra,
                                                    const std::string& instance_fields) {
  const std::string dir = engine::testing::PresetModelDir("tiny-dsv3-mtp");
  return config::ParseDeploymentConfig(
      absl::StrCat("model: {name: tiny-dsv3-mtp, path: ", dir, model_extra, "}\n",
                   "instances:\n  - {name: agg0, role: aggregated, ", instance_fields, "}\n"),
      "");
}

// Serves every request on one worker of `instance_fields`.
Served ServeAll(const std::string& model_extra, const std::string& instance_fields) {
  SCOPED_TRACE(instance_fields);
  Served served;
  absl::StatusOr<config::DeploymentConfig> deployment = Deployment(model_extra, instance_fields);
  EXPECT_THAT(deployment, IsOk());
  if (!deployment.ok()) return served;
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> rendezvous =
      comm::RendezvousServer::Start("127.0.0.1:0");
  EXPECT_THAT(rendezvous, IsOk());
  if (!rendezvous.ok()) return served;
  WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = "agg0";
  options.rendezvous_address = (*rendezvous)->address();
  options.register_with_router = false;
  options.bootstrap_timeout = absl::Seconds(60);
  options.device = 0;
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(std::move(options));
  EXPECT_THAT(worker, IsOk());
  if (!worker.ok()) return served;
  absl::Status outcome;
  std::thread loop([&] { outcome = (*worker)->Run(); });
  {
    absl::Mutex mu;
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] { ServeClient((*worker)->service_address(), c, served, mu); });
    }
    for (std::thread& t : clients) t.join();
  }
  (*worker)->RequestStop();
  loop.join();
  EXPECT_THAT(outcome, IsOk());
  return served;
}

constexpr char kCpuNoSpec[] =
    "engine: cpu, executor: {max_batch_size: 4, max_num_tokens: 256, "
    "max_num_active_requests: 8}, kv: {tokens_per_block: 16, num_blocks: 256}";
constexpr char kCudaMtp[] =
    "engine: cuda, executor: {max_batch_size: 4, max_num_tokens: 256, "
    "max_num_active_requests: 8, draft_pool: paired}, "
    "kv: {tokens_per_block: 16, num_blocks: 256, draft_num_blocks: 256}, "
    "speculative: {method: mtp, k: 2}, cuda: {dtype: f32, batch_invariant: true}";

TEST(WorkerCudaMtpTest, GreedyMtpOnTheCudaEngineEqualsTheCpuEngineWithoutSpeculation) {
  // A draft model beside the target, as a deployment whose other instances draft with
  // it would list: MTP drafts with the model's own layer and leaves it alone.
  const std::string draft_path =
      absl::StrCat(", draft_path: ", engine::testing::PresetModelDir("tiny"), "/draft");
  ASSERT_THAT(Deployment(draft_path, kCudaMtp), IsOk());
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const Served want = ServeAll("", kCpuNoSpec);
  const Served got = ServeAll(draft_path, kCudaMtp);
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE(absl::StrCat("request ", i));
    EXPECT_EQ(want.errors[i], "");
    EXPECT_EQ(got.errors[i], "");
    EXPECT_EQ(static_cast<int>(want.tokens[i].size()), Request(i).sampling().max_tokens());
    EXPECT_EQ(got.tokens[i], want.tokens[i]);
    EXPECT_EQ(want.methods[i], "");
    EXPECT_EQ(got.methods[i], "mtp");
  }
  std::cout << "MTP drafts accepted " << got.accepted << " of " << got.proposed << "\n";
  EXPECT_EQ(want.proposed, 0);
  EXPECT_GT(got.proposed, 0);
  EXPECT_GT(got.accepted, 0) << "tiny-dsv3-mtp's MTP layer tracks its target";
}

}  // namespace
}  // namespace lockstep::worker
