// `engine: cuda` and the `cuda:` block: YAML parsing, validation with errors that name
// the field, and the device index of a rank.
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/config_yaml.h"
#include "runtime/config/cuda_settings.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::config {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One aggregated instance with `instance_fields`, parsed and validated.
absl::StatusOr<DeploymentConfig> Load(const std::string& instance_fields) {
  const std::string yaml =
      "model: {name: tiny, path: /m}\n"
      "instances:\n  - {name: agg0, role: aggregated, " +
      instance_fields + "}\n";
  return ParseDeploymentConfig(yaml, "");
}

TEST(CudaSettingsTest, ParsesTheEngineAndTheBlock) {
  absl::StatusOr<DeploymentConfig> config = Load(
      "engine: cuda, executor: {max_batch_size: 4}, "
      "cuda: {dtype: f32, kv_fraction: 0.5, graph_batch_sizes: [4, 1, 2], "
      "batch_invariant: true, graphs: false}");
  ASSERT_THAT(config, IsOk());
  const InstanceConfig& instance = config->instances[0];
  EXPECT_EQ(instance.engine, EngineKind::kCuda);
  EXPECT_EQ(instance.cuda.dtype, CudaDtype::kF32);
  EXPECT_DOUBLE_EQ(instance.cuda.kv_fraction, 0.5);
  EXPECT_THAT(instance.cuda.graph_batch_sizes, ElementsAre(4, 1, 2));
  EXPECT_TRUE(instance.cuda.batch_invariant);
  EXPECT_FALSE(instance.cuda.graphs);
  EXPECT_EQ(EngineKindName(EngineKind::kCuda), "cuda");
}

TEST(CudaSettingsTest, DefaultsAreBf16WithDefaultBuckets) {
  absl::StatusOr<DeploymentConfig> config = Load("engine: cuda");
  ASSERT_THAT(config, IsOk());
  const CudaSettings& cuda = config->instances[0].cuda;
  EXPECT_EQ(cuda.dtype, CudaDtype::kBf16);
  EXPECT_THAT(cuda.graph_batch_sizes, IsEmpty());
  EXPECT_FALSE(cuda.batch_invariant);
  EXPECT_TRUE(cuda.graphs);
}

TEST(CudaSettingsTest, ParseErrorsNameTheField) {
  EXPECT_THAT(Load("engine: cuda, cuda: {dtype: fp8}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.dtype: unknown dtype 'fp8'")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graph_batch_sizes: 8}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.graph_batch_sizes: must be a list")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graph_batch_sizes: [1, x]}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.graph_batch_sizes[1]: must be an integer")));
  EXPECT_THAT(Load("engine: cuda, cuda: {batch_invariant: yes}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.batch_invariant: must be true or false")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graphs: maybe}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.graphs: must be true or false")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graph: true}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].cuda.graph")));
  EXPECT_THAT(Load("engine: gpu"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].engine")));
}

TEST(CudaSettingsTest, ValidationNamesTheField) {
  // max_batch_size 4 and K 0: at most 4 rows per step.
  EXPECT_THAT(Load("engine: cuda, executor: {max_batch_size: 4}, cuda: {kv_fraction: 0}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.kv_fraction: must be > 0 and <= 1, got 0")));
  EXPECT_THAT(
      Load("engine: cuda, cuda: {kv_fraction: 1.5}"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].cuda.kv_fraction")));
  EXPECT_THAT(
      Load("engine: cuda, executor: {max_batch_size: 4}, cuda: {graph_batch_sizes: [1, 5]}"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("instances[0].cuda.graph_batch_sizes[1]: must be in [1, 4]")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graph_batch_sizes: [0]}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.graph_batch_sizes[0]: must be in [1, ")));
  EXPECT_THAT(Load("engine: cuda, cuda: {graph_batch_sizes: [2, 2]}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda.graph_batch_sizes[1]: 2 is listed twice")));
  EXPECT_THAT(Load("engine: cpu, cuda: {dtype: f32}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].cuda: applies to engine cuda only, but the "
                                 "engine is cpu")));
}

TEST(CudaSettingsTest, SpeculationWidensTheRowRange) {
  // max_batch_size 4 with K 3: steps of up to 4 * (1 + 3) = 16 rows.
  EXPECT_THAT(Load("engine: cuda, executor: {max_batch_size: 4, max_num_tokens: 64}, "
                   "speculative: {method: ngram, num_draft_tokens: 3}, "
                   "cuda: {graph_batch_sizes: [1, 16]}"),
              IsOk());
  EXPECT_THAT(Load("engine: cuda, executor: {max_batch_size: 4, max_num_tokens: 64}, "
                   "speculative: {method: ngram, num_draft_tokens: 3}, "
                   "cuda: {graph_batch_sizes: [17]}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be in [1, 16]")));
}

TEST(CudaSettingsTest, NcclAndAutoPoolsNeedTheCudaEngine) {
  EXPECT_THAT(Load("engine: cuda, kv: {num_blocks: auto}, comm: {engine_transport: nccl}"), IsOk());
  EXPECT_THAT(
      Load("engine: cpu, comm: {engine_transport: nccl}"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("instances[0].comm.engine_transport: nccl needs the CUDA engine")));
  EXPECT_THAT(
      Load("engine: fake, kv: {num_blocks: auto}"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instances[0].kv.num_blocks: auto")));
  // The vote stays on the host (gloo or shm) even with the CUDA engine.
  EXPECT_THAT(Load("engine: cuda, comm: {vote_transport: nccl}"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("instances[0].comm.vote_transport: nccl is not available")));
}

TEST(CudaSettingsTest, TheDeviceIsTheLocalRank) {
  EXPECT_EQ(CudaDeviceIndex(0, 4), 0);
  EXPECT_EQ(CudaDeviceIndex(3, 4), 3);
  EXPECT_EQ(CudaDeviceIndex(5, 4), 1);  // the second node's second GPU
  EXPECT_EQ(CudaDeviceIndex(7, 8), 7);
}

TEST(CudaSettingsTest, ProblemsListEveryBadField) {
  CudaSettings cuda;
  cuda.kv_fraction = -1;
  cuda.graph_batch_sizes = {0, 3, 3};
  EXPECT_THAT(CudaSettingsProblems(cuda, "x.cuda", 8),
              ElementsAre(HasSubstr("x.cuda.kv_fraction"), HasSubstr("x.cuda.graph_batch_sizes[0]"),
                          HasSubstr("x.cuda.graph_batch_sizes[2]")));
  EXPECT_THAT(CudaSettingsProblems(CudaSettings(), "x.cuda", 8), IsEmpty());
}

}  // namespace
}  // namespace lockstep::config
