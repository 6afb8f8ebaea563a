#include "runtime/engine/model/model_config.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;
using Json = nlohmann::json;

Json Llama() {
  return {
      {"model_type", "llama"},           {"vocab_size", 300},           {"hidden_size", 64},
      {"intermediate_size", 128},        {"num_hidden_layers", 2},      {"num_attention_heads", 4},
      {"num_key_value_heads", 2},        {"rms_norm_eps", 1e-5},        {"rope_theta", 500000.0},
      {"max_position_embeddings", 1024}, {"tie_word_embeddings", true}, {"hidden_act", "silu"},
      {"eos_token_id", {257, 3}},        {"rope_scaling", nullptr}};
}

absl::StatusOr<ModelConfig> Parse(const Json& json) {
  return ParseModelConfig(json.dump(), "dir/config.json");
}

TEST(ModelConfigTest, ParsesLlama) {
  absl::StatusOr<ModelConfig> config = Parse(Llama());
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_type, "llama");
  EXPECT_EQ(config->vocab_size, 300);
  EXPECT_EQ(config->head_dim, 16);  // hidden / heads when absent
  EXPECT_EQ(config->num_kv_heads, 2);
  EXPECT_EQ(config->max_position, 1024);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->eos_token_id, 257);  // first of a list
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->is_moe());
}

TEST(ModelConfigTest, QwenTypesSetTheirFeatures) {
  Json qwen2 = Llama();
  qwen2["model_type"] = "qwen2";
  qwen2["use_sliding_window"] = false;
  qwen2["sliding_window"] = 4096;  // inactive without use_sliding_window
  ASSERT_THAT(Parse(qwen2), IsOk());
  EXPECT_TRUE(Parse(qwen2)->attention_bias);

  Json qwen3 = Llama();
  qwen3["model_type"] = "qwen3_moe";
  qwen3["head_dim"] = 32;
  qwen3["num_experts"] = 4;
  qwen3["num_experts_per_tok"] = 2;
  qwen3["moe_intermediate_size"] = 48;
  qwen3["norm_topk_prob"] = true;
  qwen3["mlp_only_layers"] = {1};
  absl::StatusOr<ModelConfig> config = Parse(qwen3);
  ASSERT_THAT(config, IsOk());
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_EQ(config->moe_naming, MoeNaming::kQwen);
  EXPECT_EQ(config->moe_layer, (std::vector<bool>{true, false}));
  EXPECT_EQ(config->moe_intermediate_size, 48);
}

TEST(ModelConfigTest, MixtralIsAllMoe) {
  Json mixtral = Llama();
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  mixtral["sliding_window"] = nullptr;
  absl::StatusOr<ModelConfig> config = Parse(mixtral);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->num_experts, 8);
  EXPECT_EQ(config->moe_intermediate_size, 128);
  EXPECT_EQ(config->moe_layer, (std::vector<bool>{true, true}));
  EXPECT_TRUE(config->norm_topk_prob);
}

struct Rejection {
  std::string field;
  Json value;
  std::string model_type = "llama";
};

TEST(ModelConfigTest, RejectionsNameTheField) {
  const Rejection cases[] = {
      {"model_type", "gpt2"},
      {"rope_scaling", Json{{"type", "linear"}, {"factor", 2.0}}},
      {"hidden_act", "gelu"},
      {"mlp_bias", true},
      {"sliding_window", 256, "mistral"},
      {"use_sliding_window", true, "qwen2"},
      {"shared_expert_intermediate_size", 64, "qwen2_moe"},
      {"num_key_value_heads", 3},
      {"vocab_size", "big"},
      {"num_hidden_layers", 0},
      {"head_dim", 15},
  };
  for (const Rejection& rejection : cases) {
    Json json = Llama();
    json["model_type"] = rejection.model_type;
    if (rejection.model_type == "qwen2_moe") {
      json["num_experts"] = 4;
      json["num_experts_per_tok"] = 2;
      json["moe_intermediate_size"] = 32;
    }
    json[rejection.field] = rejection.value;
    EXPECT_THAT(Parse(json),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(rejection.field)))
        << rejection.field << " = " << rejection.value.dump();
    EXPECT_THAT(Parse(json),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dir/config.json")));
  }
}

// Other absent fields take their family's default (model_config_defaults_test.cc).
TEST(ModelConfigTest, MissingRequiredFieldIsNamed) {
  Json json = Llama();
  json.erase("model_type");
  EXPECT_THAT(Parse(json), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model_type")));
  Json qwen3 = Llama();
  qwen3["model_type"] = "qwen3_moe";
  qwen3["num_experts"] = 4;
  qwen3["num_experts_per_tok"] = 2;
  qwen3["moe_intermediate_size"] = 48;
  EXPECT_THAT(Parse(qwen3), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim")));
}

TEST(ModelConfigTest, NotJsonIsAnError) {
  EXPECT_THAT(ParseModelConfig("{\"model_type\": ", "x/config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("x/config.json")));
  EXPECT_THAT(ParseModelConfig("[1, 2]", "x/config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ModelConfigTest, JsonRoundTrip) {
  for (const char* type : {"llama", "mistral", "qwen2", "mixtral", "qwen2_moe", "qwen3_moe"}) {
    Json json = Llama();
    json["model_type"] = type;
    json["head_dim"] = 16;
    json["num_experts"] = 4;
    json["num_local_experts"] = 4;
    json["num_experts_per_tok"] = 1;
    json["moe_intermediate_size"] = 24;
    json["shared_expert_intermediate_size"] = 0;
    absl::StatusOr<ModelConfig> config = Parse(json);
    ASSERT_THAT(config, IsOk()) << type;
    absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*config), "again");
    ASSERT_THAT(again, IsOk()) << type;
    EXPECT_EQ(ModelConfigToJson(*again), ModelConfigToJson(*config)) << type;
    EXPECT_EQ(again->moe_layer, config->moe_layer) << type;
    EXPECT_EQ(again->qk_norm, config->qk_norm) << type;
    EXPECT_EQ(again->attention_bias, config->attention_bias) << type;
  }
}

}  // namespace
}  // namespace lockstep::engine
