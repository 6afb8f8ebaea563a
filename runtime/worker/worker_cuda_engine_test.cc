// A worker built without CUDA whose instance names `engine: cuda` fails at start,
// before it allocates KV or waits for peers, with an error that says why and names the
// instance. (A CUDA build starts the engine: the GPU checks serve it,
// runtime/cuda/engine/cuda_serving_test.cc.)
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/config/config_yaml.h"
#include "runtime/engine/device/cuda_support.h"
#include "runtime/worker/worker.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(WorkerCudaEngineTest, FailsAtStartWithAClearError) {
  if (engine::BuiltWithCuda()) GTEST_SKIP() << "this binary has the CUDA engine";
  absl::StatusOr<config::DeploymentConfig> deployment = config::ParseDeploymentConfig(
      "model: {name: m, path: /nonexistent/m}\n"
      "instances:\n"
      "  - {name: gpu0, role: aggregated, engine: cuda, cuda: {dtype: f32}}\n",
      "");
  ASSERT_THAT(deployment, IsOk());
  WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = "gpu0";
  options.register_with_router = false;
  // Nothing listens here: the worker must fail before it tries to reach it.
  options.rendezvous_address = "127.0.0.1:1";
  options.bootstrap_timeout = absl::Seconds(1);
  const absl::Status support = engine::CudaEngineSupport();
  ASSERT_FALSE(support.ok());
  EXPECT_THAT(Worker::Start(std::move(options)),
              StatusIs(support.code(), AllOf(HasSubstr("instance gpu0"),
                                             HasSubstr(std::string(support.message())))));
  EXPECT_THAT(support,
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without CUDA")));
}

// A CUDA build starts the engine after the bootstrap; on a machine without a GPU it
// stops there with an error naming the instance, the rank and the device.
TEST(WorkerCudaEngineTest, ACudaBuildNamesTheMissingDevice) {
  if (!engine::BuiltWithCuda()) GTEST_SKIP() << "this binary has no CUDA engine";
  absl::StatusOr<config::DeploymentConfig> deployment = config::ParseDeploymentConfig(
      "model: {name: m, path: /nonexistent/m}\n"
      "instances:\n"
      "  - {name: gpu0, role: aggregated, engine: cuda}\n",
      "");
  ASSERT_THAT(deployment, IsOk());
  absl::StatusOr<std::unique_ptr<comm::RendezvousServer>> rendezvous =
      comm::RendezvousServer::Start("127.0.0.1:0");
  ASSERT_THAT(rendezvous, IsOk());
  WorkerOptions options;
  options.deployment = *std::move(deployment);
  options.instance = "gpu0";
  options.register_with_router = false;
  options.rendezvous_address = (*rendezvous)->address();
  options.bootstrap_timeout = absl::Seconds(10);
  const absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(std::move(options));
  ASSERT_FALSE(worker.ok());
  EXPECT_THAT(worker.status().message(), HasSubstr("instance gpu0: rank 0 on device 0"));
}

}  // namespace
}  // namespace lockstep::worker
