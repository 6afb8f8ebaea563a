// The DeepSeek-V3 family's config.json: every field it reads, its default when absent
// (DeepseekV3Config's, written here from transformers' class independently of
// model_config_defaults.cc), what is refused (by field and value), and the round trip
// through ModelConfigToJson.
#include <cmath>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// A small DeepSeek-V3 config whose every value differs from DeepseekV3Config's default.
Json Tiny() {
  return {{"model_type", "deepseek_v3"},
          {"vocab_size", 300},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"moe_intermediate_size", 24},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 4},
          {"n_shared_experts", 2},
          {"n_routed_experts", 16},
          {"routed_scaling_factor", 1.5},
          {"kv_lora_rank", 32},
          {"q_lora_rank", 48},
          {"qk_rope_head_dim", 8},
          {"v_head_dim", 12},
          {"qk_nope_head_dim", 16},
          {"n_group", 4},
          {"topk_group", 2},
          {"num_experts_per_tok", 3},
          {"first_k_dense_replace", 1},
          {"moe_layer_freq", 1},
          {"norm_topk_prob", false},
          {"topk_method", "noaux_tc"},
          {"scoring_func", "sigmoid"},
          {"num_nextn_predict_layers", 1},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 5000.0},
          {"bos_token_id", 3},
          {"eos_token_id", 4},
          {"tie_word_embeddings", false},
          {"rope_scaling",
           {{"type", "yarn"},
            {"factor", 4},
            {"original_max_position_embeddings", 128},
            {"beta_fast", 16},
            {"beta_slow", 2},
            {"mscale", 0.5},
            {"mscale_all_dim", 0.5}}},
          {"quantization_config",
           {{"quant_method", "fp8"},
            {"fmt", "e4m3"},
            {"activation_scheme", "dynamic"},
            {"weight_block_size", {128, 128}}}}};
}

absl::StatusOr<ModelConfig> Parse(const Json& json) {
  return ParseModelConfig(json.dump(), "dir/config.json");
}

TEST(DeepseekConfigTest, ParsesEveryField) {
  absl::StatusOr<ModelConfig> c = Parse(Tiny());
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->is_deepseek());
  EXPECT_TRUE(c->mla);
  EXPECT_EQ(c->mla_dims.q_lora_rank, 48);
  EXPECT_EQ(c->mla_dims.kv_lora_rank, 32);
  EXPECT_EQ(c->mla_dims.qk_nope_head_dim, 16);
  EXPECT_EQ(c->mla_dims.qk_rope_head_dim, 8);
  EXPECT_EQ(c->mla_dims.v_head_dim, 12);
  EXPECT_EQ(c->head_dim, 24);
  EXPECT_EQ(c->rope_dim(), 8);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->n_shared_experts, 2);
  EXPECT_EQ(c->moe_intermediate_size, 24);
  EXPECT_EQ(c->num_experts_per_tok, 3);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.5);
  EXPECT_EQ(c->scoring, ExpertScoring::kSigmoid);
  EXPECT_TRUE(c->score_correction_bias);
  EXPECT_EQ(c->moe_naming, MoeNaming::kQwen);
  EXPECT_EQ(c->moe_layer, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(c->num_nextn_predict_layers, 1);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5000.0);
  ASSERT_TRUE(c->yarn);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.factor, 4.0);
  EXPECT_EQ(c->yarn_scaling.original_max_position, 128);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.mscale, 0.5);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.mscale_all_dim, 0.5);
  EXPECT_TRUE(c->fp8.enabled);
  EXPECT_EQ(c->fp8.block_rows, 128);
  EXPECT_EQ(c->fp8.block_cols, 128);
}

TEST(DeepseekConfigTest, KimiK2IsTheSameArchitecture) {
  Json json = Tiny();
  json["model_type"] = "kimi_k2";
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->mla);
  EXPECT_EQ(c->num_experts, 16);
}

TEST(DeepseekConfigTest, NullQLoraRankMeansQProj) {
  Json json = Tiny();
  json["q_lora_rank"] = nullptr;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->mla_dims.q_lora_rank, 0);
}

TEST(DeepseekConfigTest, NullRoutedExpertsIsDense) {
  Json json = Tiny();
  json["n_routed_experts"] = nullptr;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->is_moe());
}

TEST(DeepseekConfigTest, MoeLayerFrequency) {
  Json json = Tiny();
  json["num_hidden_layers"] = 6;
  json["moe_layer_freq"] = 2;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->moe_layer, (std::vector<bool>{false, false, true, false, true, false}));
}

TEST(DeepseekConfigTest, SoftmaxScoringIsAccepted) {
  Json json = Tiny();
  json["scoring_func"] = "softmax";
  ASSERT_THAT(Parse(json), IsOk());
  EXPECT_EQ(Parse(json)->scoring, ExpertScoring::kSoftmax);
}

TEST(DeepseekConfigTest, YarnScalesTheSoftmax) {
  Json json = Tiny();
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  const double m_all = 0.1 * 0.5 * std::log(4.0) + 1.0;
  EXPECT_NEAR(c->softmax_scale(), m_all * m_all / std::sqrt(24.0), 1e-12);
  EXPECT_NEAR(c->yarn_scaling.RopeMagnitude(), 1.0, 1e-12);  // mscale == mscale_all_dim
  json["rope_scaling"].erase("mscale_all_dim");
  json["rope_scaling"].erase("mscale");
  c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_NEAR(c->softmax_scale(), 1.0 / std::sqrt(24.0), 1e-12);
  EXPECT_NEAR(c->yarn_scaling.RopeMagnitude(), 0.1 * std::log(4.0) + 1.0, 1e-12);
  json["rope_scaling"] = nullptr;
  c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_FALSE(c->yarn);
  EXPECT_NEAR(c->softmax_scale(), 1.0 / std::sqrt(24.0), 1e-12);
}

TEST(DeepseekConfigTest, Transformers5RopeParameters) {
  Json json = Tiny();
  json.erase("rope_theta");
  json["rope_parameters"] = json["rope_scaling"];
  json.erase("rope_scaling");
  json["rope_parameters"].erase("type");
  json["rope_parameters"]["rope_type"] = "yarn";
  json["rope_parameters"]["rope_theta"] = 7000.0;
  absl::StatusOr<ModelConfig> c = Parse(json);
  ASSERT_THAT(c, IsOk());
  EXPECT_TRUE(c->yarn);
  EXPECT_DOUBLE_EQ(c->rope_theta, 7000.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.factor, 4.0);
}

TEST(DeepseekConfigTest, KvCacheHoldsTheLatentVector) {
  absl::StatusOr<ModelConfig> c = Parse(Tiny());
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->cache_kv_heads(), 1);
  EXPECT_EQ(c->cache_head_dim(), 20);  // (32 + 8) / 2: K plane one half, V plane the other
  EXPECT_EQ(c->kv_values_per_token(), 4 * 40);
  Json odd = Tiny();
  odd["kv_lora_rank"] = 31;
  c = Parse(odd);
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->cache_head_dim(), 20);  // 39 rounded up to 40
  // DeepSeek-V3's: 576 values per token and layer.
  absl::StatusOr<ModelConfig> v3 = Parse({{"model_type", "deepseek_v3"}});
  ASSERT_THAT(v3, IsOk());
  EXPECT_EQ(v3->kv_values_per_token(), 61 * 576);
}

// An absent field: DeepseekV3Config's default (configuration_deepseek_v3.py).
TEST(DeepseekConfigTest, AbsentFieldsTakeDeepseekV3ConfigDefaults) {
  absl::StatusOr<ModelConfig> c = Parse({{"model_type", "deepseek_v3"}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->vocab_size, 129280);
  EXPECT_EQ(c->hidden_size, 7168);
  EXPECT_EQ(c->intermediate_size, 18432);
  EXPECT_EQ(c->moe_intermediate_size, 2048);
  EXPECT_EQ(c->num_layers, 61);
  EXPECT_EQ(c->num_heads, 128);
  EXPECT_EQ(c->num_kv_heads, 128);
  EXPECT_EQ(c->n_shared_experts, 1);
  EXPECT_EQ(c->num_experts, 256);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_EQ(c->mla_dims.kv_lora_rank, 512);
  EXPECT_EQ(c->mla_dims.q_lora_rank, 1536);
  EXPECT_EQ(c->mla_dims.qk_rope_head_dim, 64);
  EXPECT_EQ(c->mla_dims.v_head_dim, 128);
  EXPECT_EQ(c->mla_dims.qk_nope_head_dim, 128);
  EXPECT_EQ(c->n_group, 8);
  EXPECT_EQ(c->topk_group, 4);
  EXPECT_EQ(c->num_experts_per_tok, 8);
  EXPECT_EQ(c->first_k_dense_replace, 3);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->max_position, 4096);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->bos_token_id, 0);
  EXPECT_EQ(c->eos_token_id, 1);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->scoring, ExpertScoring::kSigmoid);
  EXPECT_FALSE(c->yarn);
  EXPECT_FALSE(c->fp8.enabled);
  EXPECT_EQ(c->num_nextn_predict_layers, 0);
  EXPECT_EQ(c->moe_layer[2], false);
  EXPECT_EQ(c->moe_layer[3], true);
  // YaRN without the optional fields: beta 32 / 1, no mscale, the context as original.
  Json yarn = {{"model_type", "deepseek_v3"}, {"rope_scaling", {{"type", "yarn"}, {"factor", 40}}}};
  c = Parse(yarn);
  ASSERT_THAT(c, IsOk());
  EXPECT_DOUBLE_EQ(c->yarn_scaling.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.mscale, 1.0);
  EXPECT_DOUBLE_EQ(c->yarn_scaling.mscale_all_dim, 0.0);
  EXPECT_EQ(c->yarn_scaling.original_max_position, 4096);
}

struct Refusal {
  std::string field;  // set to `value` in Tiny()
  Json value;
  std::string named;  // the error names the field (this) and the value
  std::string value_text;
};

TEST(DeepseekConfigTest, RefusalsNameFieldAndValue) {
  const Refusal cases[] = {
      {"topk_method", "greedy", "topk_method", "greedy"},
      {"topk_method", "group_limited_greedy", "topk_method", "group_limited_greedy"},
      {"scoring_func", "tanh", "scoring_func", "tanh"},
      {"rope_scaling", Json{{"type", "linear"}, {"factor", 2.0}}, "rope_scaling", "linear"},
      {"rope_scaling", Json{{"type", "yarn"}, {"factor", 2.0}, {"truncate", false}}, "rope_scaling",
       "truncate"},
      {"rope_scaling", Json{{"type", "yarn"}}, "rope_scaling", "factor"},
      {"rope_scaling", Json{{"type", "yarn"}, {"factor", 0.5}}, "rope_scaling", "0.5"},
      {"quantization_config", Json{{"quant_method", "gptq"}}, "quantization_config", "gptq"},
      {"quantization_config",
       Json{{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}},
       "quantization_config", "e5m2"},
      {"quantization_config", Json{{"quant_method", "fp8"}, {"weight_block_size", {64, 64}}},
       "quantization_config", "[64,64]"},
      {"quantization_config",
       Json{{"quant_method", "fp8"},
            {"activation_scheme", "static"},
            {"weight_block_size", {128, 128}}},
       "quantization_config", "static"},
      {"attention_bias", true, "attention_bias", "true"},
      {"rope_interleave", false, "rope_interleave", "false"},
      {"hidden_act", "gelu", "hidden_act", "gelu"},
      {"n_group", 3, "n_group", "3"},
      {"topk_group", 5, "topk_group", "5"},
      {"num_experts_per_tok", 20, "num_experts_per_tok", "20"},
      {"num_local_experts", 8, "n_routed_experts", "8"},
      {"qk_rope_head_dim", 7, "qk_rope_head_dim", "7"},
      {"kv_lora_rank", 0, "kv_lora_rank", "0"},
      {"q_lora_rank", "big", "q_lora_rank", "integer"},
      {"ep_size", 4, "ep_size", "4"},
  };
  for (const Refusal& refusal : cases) {
    Json json = Tiny();
    json[refusal.field] = refusal.value;
    EXPECT_THAT(Parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                      AllOf(HasSubstr("dir/config.json"), HasSubstr(refusal.named),
                                            HasSubstr(refusal.value_text))))
        << refusal.field << " = " << refusal.value.dump();
  }
}

TEST(DeepseekConfigTest, JsonRoundTrip) {
  std::vector<Json> variants = {Tiny()};
  variants.push_back(Tiny());
  variants.back()["q_lora_rank"] = nullptr;
  variants.back()["rope_scaling"] = nullptr;
  variants.back().erase("quantization_config");
  variants.push_back(Tiny());
  variants.back()["n_routed_experts"] = nullptr;
  variants.back()["model_type"] = "kimi_k2";
  variants.push_back(Tiny());
  variants.back()["scoring_func"] = "softmax";
  variants.back()["moe_layer_freq"] = 2;
  for (const Json& json : variants) {
    absl::StatusOr<ModelConfig> config = Parse(json);
    ASSERT_THAT(config, IsOk()) << json.dump();
    const std::string text = ModelConfigToJson(*config);
    EXPECT_FALSE(Json::parse(text).contains("head_dim")) << text;
    absl::StatusOr<ModelConfig> again = ParseModelConfig(text, "again");
    ASSERT_THAT(again, IsOk()) << text;
    EXPECT_EQ(ModelConfigToJson(*again), text);
    EXPECT_EQ(again->moe_layer, config->moe_layer);
    EXPECT_EQ(again->mla_dims.q_lora_rank, config->mla_dims.q_lora_rank);
    EXPECT_EQ(again->yarn, config->yarn);
    EXPECT_EQ(again->fp8.enabled, config->fp8.enabled);
    EXPECT_EQ(again->scoring, config->scoring);
    EXPECT_EQ(again->num_nextn_predict_layers, config->num_nextn_predict_layers);
    EXPECT_DOUBLE_EQ(again->softmax_scale(), config->softmax_scale());
  }
}

}  // namespace
}  // namespace lockstep::engine
