// A context worker and a generation worker in one process, both with their KV pools in
// fake device memory (kvcache/testing/fake_device_allocator.h: an address range that
// crashes on any direct access, whose bytes only the allocator's copiers reach). A
// request's context leg on one and its generation leg on the other move its KV over the
// TCP data plane: the workers wire the allocator's copiers into the transfer, and
// nothing touches a block pointer (the process would die).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kvcache/testing/fake_device_allocator.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/config/config_yaml.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;

constexpr char kYaml[] = R"(model:
  name: fake-model
  path: /nonexistent/fake-model
instances:
  - name: ctx0
    role: context
    world_size: 1
    engine: fake
    executor: {max_batch_size: 4, max_num_tokens: 256, max_num_active_requests: 8}
    kv: {tokens_per_block: 16, num_blocks: 64}
  - name: gen0
    role: generation
    world_size: 1
    engine: fake
    executor: {max_batch_size: 4, max_num_tokens: 256, max_num_active_requests: 8}
    kv: {tokens_per_block: 16, num_blocks: 64}
)";

// A started worker whose step loop runs on its own thread until the test ends.
struct RunningWorker {
  std::unique_ptr<Worker> worker;
  std::thread loop;
  absl::Status outcome;

  ~RunningWorker() {
    if (worker != nullptr) worker->RequestStop();
    if (loop.joinable()) loop.join();
  }
};

std::unique_ptr<RunningWorker> StartWorker(const config::DeploymentConfig& deployment,
                                           const std::string& instance,
                                           const std::string& rendezvous,
                                           kv::BlockAllocator* allocator) {
  WorkerOptions options;
  options.deployment = deployment;
  options.instance = instance;
  options.rendezvous_address = rendezvous;
  options.register_with_router = false;
  options.bootstrap_timeout = absl::Seconds(30);
  options.kv_allocator = allocator;
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(std::move(options));
  EXPECT_THAT(worker, IsOk()) << instance;
  if (!worker.ok()) return nullptr;
  auto running = std::make_unique<RunningWorker>();
  running->worker = std::move(*worker);
  RunningWorker* r = running.get();
  r->loop = std::thread([r] { r->outcome = r->worker->Run(); });
  return running;
}

// Sends `request` to the worker service at `address`; the responses until the stream
// ends (bounded by a deadline).
std::vector<v1::GenerateResponse> Generate(const std::string& address,
                                           const v1::GenerateRequest& request) {
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  std::vector<v1::GenerateResponse> responses;
  v1::GenerateResponse response;
  while (reader->Read(&response)) responses.push_back(response);
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return responses;
}

TEST(WorkerDeviceMemoryTest, DisaggregatedKvMovesBetweenDevicePoolsThroughTheCopiers) {
  absl::StatusOr<config::DeploymentConfig> deployment =
      config::ParseDeploymentConfig(kYaml, "", "test");
  ASSERT_THAT(deployment, IsOk());
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> rendezvous =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(rendezvous, IsOk());
  kv::testing::FakeDeviceAllocator ctx_memory;
  kv::testing::FakeDeviceAllocator gen_memory;
  {
    std::unique_ptr<RunningWorker> ctx =
        StartWorker(*deployment, "ctx0", (*rendezvous)->address(), &ctx_memory);
    std::unique_ptr<RunningWorker> gen =
        StartWorker(*deployment, "gen0", (*rendezvous)->address(), &gen_memory);
    ASSERT_TRUE(ctx != nullptr && gen != nullptr);

    // 40 prompt tokens: 3 blocks of 16 move.
    v1::GenerateRequest request;
    request.set_request_id(1);
    request.set_model("fake-model");
    for (int i = 0; i < 40; ++i) request.add_prompt_token_ids(33 + i);
    request.mutable_sampling()->set_max_tokens(4);
    request.mutable_sampling()->set_ignore_eos(true);
    request.set_type(v1::REQUEST_TYPE_CONTEXT_ONLY);
    const std::vector<v1::GenerateResponse> context =
        Generate(ctx->worker->service_address(), request);
    ASSERT_FALSE(context.empty());
    ASSERT_EQ(context.back().finish_reason(), v1::FINISH_REASON_HANDOFF)
        << context.back().error_message();

    request.set_type(v1::REQUEST_TYPE_GENERATION_ONLY);
    *request.mutable_context() = context.back().context();
    const std::vector<v1::GenerateResponse> generation =
        Generate(gen->worker->service_address(), request);
    ASSERT_FALSE(generation.empty());
    EXPECT_EQ(generation.back().finish_reason(), v1::FINISH_REASON_LENGTH)
        << generation.back().error_message();
    int tokens = 0;
    for (const v1::GenerateResponse& r : generation) tokens += r.token_ids_size();
    EXPECT_EQ(tokens, 3);  // the first came from the context leg
  }
  // The KV left the context pool and entered the generation pool through the copiers
  // only (any direct access to the slabs would have crashed the test).
  const int64_t moved = 3 * 16 * 2;  // 3 blocks of the fake engine's 1x1x1 f32 layout
  EXPECT_GE(ctx_memory.copy_out_calls(), 1);
  EXPECT_EQ(ctx_memory.bytes_out(), moved * 4);
  EXPECT_GE(gen_memory.copy_in_calls(), 1);
  EXPECT_EQ(gen_memory.bytes_in(), moved * 4);
}

}  // namespace
}  // namespace lockstep::worker
