// The tensors of the DeepSeek-V3 family: names and shapes as its checkpoints store them,
// which are FP8 under quantization_config, dense MLPs below first_k_dense_replace.
#include "runtime/engine/model/tensor_names.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

ModelConfig Deepseek(int q_lora_rank, bool fp8) {
  const std::string json = absl::StrCat(R"({"model_type": "deepseek_v3", "vocab_size": 100,
    "hidden_size": 32, "intermediate_size": 40, "moe_intermediate_size": 8,
    "num_hidden_layers": 2, "num_attention_heads": 2, "n_shared_experts": 2,
    "n_routed_experts": 4, "kv_lora_rank": 16, "q_lora_rank": )",
                                        q_lora_rank > 0 ? absl::StrCat(q_lora_rank) : "null",
                                        R"(, "qk_rope_head_dim": 4, "v_head_dim": 6,
    "qk_nope_head_dim": 10, "n_group": 2, "topk_group": 1, "num_experts_per_tok": 2,
    "first_k_dense_replace": 1)",
                                        fp8 ? R"(, "quantization_config": {"quant_method": "fp8",
    "fmt": "e4m3", "weight_block_size": [128, 128]}})"
                                            : "}");
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json, "test");
  EXPECT_TRUE(config.ok()) << config.status() << json;
  return *config;
}

std::map<std::string, TensorSpec> ByName(const ModelConfig& config) {
  std::map<std::string, TensorSpec> out;
  for (TensorSpec& spec : ModelTensorSpecs(config)) out[spec.name] = spec;
  return out;
}

using Shape = std::vector<int64_t>;

TEST(TensorNamesTest, DeepseekLayers) {
  const std::map<std::string, TensorSpec> specs = ByName(Deepseek(12, false));
  const std::map<std::string, Shape> want = {
      {"model.layers.0.self_attn.q_a_proj.weight", {12, 32}},
      {"model.layers.0.self_attn.q_a_layernorm.weight", {12}},
      {"model.layers.0.self_attn.q_b_proj.weight", {2 * 14, 12}},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {20, 32}},
      {"model.layers.0.self_attn.kv_a_layernorm.weight", {16}},
      {"model.layers.0.self_attn.kv_b_proj.weight", {2 * 16, 16}},
      {"model.layers.0.self_attn.o_proj.weight", {32, 12}},
      {"model.layers.0.mlp.gate_proj.weight", {40, 32}},  // dense below first_k_dense_replace
      {"model.layers.0.mlp.down_proj.weight", {32, 40}},
      {"model.layers.1.mlp.gate.weight", {4, 32}},
      {"model.layers.1.mlp.gate.e_score_correction_bias", {4}},
      {"model.layers.1.mlp.experts.3.up_proj.weight", {8, 32}},
      {"model.layers.1.mlp.experts.3.down_proj.weight", {32, 8}},
      {"model.layers.1.mlp.shared_experts.gate_proj.weight", {16, 32}},
      {"model.layers.1.mlp.shared_experts.down_proj.weight", {32, 16}},
      {"lm_head.weight", {100, 32}},
  };
  for (const auto& [name, shape] : want) {
    ASSERT_TRUE(specs.count(name)) << name;
    EXPECT_EQ(specs.at(name).shape, shape) << name;
    EXPECT_FALSE(specs.at(name).fp8) << name;
  }
  EXPECT_EQ(specs.count("model.layers.0.mlp.gate.weight"), 0);
  EXPECT_EQ(specs.count("model.layers.1.mlp.gate_proj.weight"), 0);
  EXPECT_EQ(specs.count("model.layers.0.self_attn.q_proj.weight"), 0);
  EXPECT_EQ(specs.count("model.layers.0.self_attn.k_proj.weight"), 0);
  // 2 layers x (7 attention + 2 norms) + dense 3 + router 2 + 4 x 3 experts + 3 shared
  // + embedding, final norm, head.
  EXPECT_EQ(specs.size(), 18 + 3 + 2 + 12 + 3 + 3);
}

TEST(TensorNamesTest, DeepseekWithoutQLoraHasQProj) {
  const std::map<std::string, TensorSpec> specs = ByName(Deepseek(0, false));
  ASSERT_TRUE(specs.count("model.layers.1.self_attn.q_proj.weight"));
  EXPECT_EQ(specs.at("model.layers.1.self_attn.q_proj.weight").shape, (Shape{28, 32}));
  EXPECT_EQ(specs.count("model.layers.1.self_attn.q_a_proj.weight"), 0);
  EXPECT_EQ(specs.count("model.layers.1.self_attn.q_a_layernorm.weight"), 0);
}

TEST(TensorNamesTest, Fp8MarksTheLayersProjectionsOnly) {
  const std::map<std::string, TensorSpec> specs = ByName(Deepseek(12, true));
  for (const auto& [name, spec] : specs) {
    const bool projection = absl::StrContains(name, "proj");
    EXPECT_EQ(spec.fp8, projection) << name;
  }
  EXPECT_TRUE(specs.at("model.layers.1.mlp.experts.0.gate_proj.weight").fp8);
  EXPECT_FALSE(specs.at("model.layers.1.mlp.gate.weight").fp8);
  EXPECT_FALSE(specs.at("lm_head.weight").fp8);
}

}  // namespace
}  // namespace lockstep::engine
