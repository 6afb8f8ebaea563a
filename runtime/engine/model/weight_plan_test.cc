#include "runtime/engine/model/weight_plan.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

ModelConfig Preset(const std::string& name) { return *PresetConfig(name); }

// Every stored tensor name of the plan.
std::set<std::string> PartNames(const ModelPlan& plan) {
  std::set<std::string> names;
  for (const WeightSource* w : plan.All()) {
    for (const TensorPart& part : w->parts) names.insert(part.name);
  }
  return names;
}

TEST(WeightPlanTest, OneRankReadsEveryStoredTensorOnce) {
  for (const std::string preset : {"tiny", "tiny-moe"}) {
    SCOPED_TRACE(preset);
    const ModelConfig config = Preset(preset);
    const ModelPlan plan = PlanWeights(config, 0, 1);
    std::set<std::string> specs;
    size_t spec_elements = 0;
    for (const TensorSpec& spec : ModelTensorSpecs(config)) {
      specs.insert(spec.name);
      size_t n = 1;
      for (int64_t d : spec.shape) n *= static_cast<size_t>(d);
      spec_elements += n;
    }
    EXPECT_EQ(PartNames(plan), specs);
    EXPECT_EQ(plan.TotalElements(), spec_elements);
  }
}

TEST(WeightPlanTest, ShapesStackThePartsInOrder) {
  ModelConfig config = Preset("tiny");
  config.attention_bias = true;
  config.qk_norm = true;
  const ModelPlan plan = PlanWeights(config, 0, 1);
  const LayerSource& layer = plan.layers[1];
  EXPECT_EQ(layer.qkv.label, "model.layers.1.qkv");
  ASSERT_EQ(layer.qkv.parts.size(), 3u);
  EXPECT_EQ(layer.qkv.parts[0].name, AttentionName(1, "q_proj", "weight"));
  EXPECT_EQ(layer.qkv.parts[2].name, AttentionName(1, "v_proj", "weight"));
  EXPECT_EQ(layer.qkv.rows, config.q_dim() + 2 * config.kv_dim());
  EXPECT_EQ(layer.qkv.cols, config.hidden_size);
  EXPECT_TRUE(layer.qkv_bias.is_vector());
  EXPECT_EQ(layer.qkv_bias.rows, config.q_dim() + 2 * config.kv_dim());
  EXPECT_EQ(layer.q_norm.rows, config.head_dim);
  EXPECT_EQ(layer.mlp.gate_up.rows, 2 * config.intermediate_size);
  EXPECT_EQ(layer.mlp.down.rows, config.hidden_size);
  EXPECT_EQ(layer.mlp.down.cols, config.intermediate_size);
  EXPECT_EQ(layer.o.cols, config.q_dim());
  EXPECT_FALSE(plan.tied_lm_head);
  EXPECT_EQ(plan.lm_head.parts[0].name, LmHeadName());

  config.attention_bias = false;
  config.qk_norm = false;
  config.tie_word_embeddings = true;
  const ModelPlan tied = PlanWeights(config, 0, 1);
  EXPECT_TRUE(tied.layers[0].qkv_bias.parts.empty());
  EXPECT_TRUE(tied.layers[0].q_norm.parts.empty());
  EXPECT_TRUE(tied.tied_lm_head);
  EXPECT_EQ(tied.lm_head.parts[0].name, EmbeddingName());
  EXPECT_EQ(PartNames(tied).count(LmHeadName()), 0u);
}

TEST(WeightPlanTest, ExpertParallelRanksHoldDisjointExpertsCoveringAll) {
  const ModelConfig config = Preset("tiny-moe");
  for (int world : {2, 3, 8}) {
    std::vector<int> holders(config.num_experts, 0);
    size_t expert_elements = 0;
    for (int rank = 0; rank < world; ++rank) {
      const ModelPlan plan = PlanWeights(config, rank, world);
      const LayerSource& layer = plan.layers[0];
      ASSERT_TRUE(layer.is_moe);
      EXPECT_EQ(layer.local.first, ExpertsOfRank(config.num_experts, rank, world).first);
      ASSERT_EQ(static_cast<int>(layer.experts.size()), layer.local.size());
      for (int e = layer.local.first; e < layer.local.end; ++e) {
        ++holders[e];
        EXPECT_EQ(layer.experts[e - layer.local.first].gate_up.parts[0].name,
                  ExpertName(config, 0, e, ExpertPart::kGate));
      }
      for (const SwiGluSource& expert : layer.experts) {
        expert_elements += expert.gate_up.elements() + expert.down.elements();
      }
      // Every rank holds the router and the attention.
      EXPECT_EQ(layer.router.rows, config.num_experts);
    }
    EXPECT_EQ(holders, std::vector<int>(config.num_experts, 1)) << "world " << world;
    const size_t one_expert = 3 * static_cast<size_t>(config.moe_intermediate_size) *
                              static_cast<size_t>(config.hidden_size);
    EXPECT_EQ(expert_elements, one_expert * config.num_experts) << "world " << world;
  }
}

TEST(WeightPlanTest, ReadWeightStacksThePartsAndNamesAMissingTensor) {
  const std::string dir = JoinPath(std::getenv("TEST_TMPDIR"), "tiny");
  ASSERT_THAT(WriteModel(Preset("tiny"), dir, /*seed=*/1, DType::kF32), IsOk());
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> tensors = SafetensorsModel::Open(dir);
  ASSERT_THAT(tensors, IsOk());
  const ModelConfig config = Preset("tiny");
  const ModelPlan plan = PlanWeights(config, 0, 1);
  const WeightSource& qkv = plan.layers[0].qkv;
  absl::StatusOr<std::vector<float>> stacked = ReadWeight(**tensors, qkv);
  ASSERT_THAT(stacked, IsOk());
  ASSERT_EQ(stacked->size(), qkv.elements());
  size_t at = 0;
  for (const TensorPart& part : qkv.parts) {
    absl::StatusOr<std::vector<float>> values =
        (*tensors)->ReadFloat(part.name, {part.rows, qkv.cols});
    ASSERT_THAT(values, IsOk());
    EXPECT_TRUE(std::equal(values->begin(), values->end(), stacked->begin() + at)) << part.name;
    at += values->size();
  }
  absl::StatusOr<std::vector<float>> norm = ReadWeight(**tensors, plan.final_norm);
  ASSERT_THAT(norm, IsOk());
  EXPECT_EQ(norm->size(), static_cast<size_t>(config.hidden_size));

  WeightSource missing = qkv;
  missing.parts[1].name = "model.layers.0.self_attn.nothing.weight";
  EXPECT_THAT(ReadWeight(**tensors, missing),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nothing")));
}

}  // namespace
}  // namespace lockstep::engine
