// ParseModelConfig's defaults: for every supported model_type and every field it reads,
// a config.json without the field parses to the default of that type's configuration
// class in Hugging Face transformers (the expectations below are written from those
// classes, independently of model_config_defaults.cc), or is refused by name where the
// class has none. Plus what an explicit null means, and transformers 5's spellings.
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

// A complete config of `type` whose every value differs from the type's default, and
// whose shape stays valid whichever single field falls back to its default (64 heads:
// every default KV-head count divides it; 10 experts: at least every default top-k).
Json Full(const std::string& type) {
  Json json = {
      {"model_type", type},       {"vocab_size", 300},      {"hidden_size", 1024},
      {"intermediate_size", 96},  {"num_hidden_layers", 3}, {"num_attention_heads", 64},
      {"num_key_value_heads", 2}, {"head_dim", 8},          {"max_position_embeddings", 1000},
      {"rms_norm_eps", 1e-3},     {"rope_theta", 123.0},    {"tie_word_embeddings", true},
      {"bos_token_id", 5},        {"eos_token_id", 6},
  };
  if (type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen3_moe") {
    json["attention_bias"] = true;
  }
  // Mistral's default window (4096) would refuse a longer default context.
  if (type == "mistral") json["sliding_window"] = nullptr;
  if (type == "mixtral") {
    json["num_local_experts"] = 10;
    json["num_experts_per_tok"] = 1;
  }
  if (type == "qwen2_moe" || type == "qwen3_moe") {
    json["num_experts"] = 10;
    json["num_experts_per_tok"] = 1;
    json["moe_intermediate_size"] = 40;
    json["norm_topk_prob"] = true;
    json["decoder_sparse_step"] = 2;
  }
  if (type == "qwen2_moe") json["shared_expert_intermediate_size"] = 0;
  return json;
}

// The parsed value of config.json field `field`, as JSON.
Json ParsedValue(const ModelConfig& c, const std::string& field) {
  if (field == "vocab_size") return c.vocab_size;
  if (field == "hidden_size") return c.hidden_size;
  if (field == "intermediate_size") return c.intermediate_size;
  if (field == "num_hidden_layers") return c.num_layers;
  if (field == "num_attention_heads") return c.num_heads;
  if (field == "num_key_value_heads") return c.num_kv_heads;
  if (field == "head_dim") return c.head_dim;
  if (field == "max_position_embeddings") return c.max_position;
  if (field == "rms_norm_eps") return c.rms_norm_eps;
  if (field == "rope_theta") return c.rope_theta;
  if (field == "tie_word_embeddings") return c.tie_word_embeddings;
  if (field == "attention_bias") return c.attention_bias;
  if (field == "bos_token_id") return c.bos_token_id;
  if (field == "eos_token_id") return c.eos_token_id;
  if (field == "num_local_experts" || field == "num_experts") return c.num_experts;
  if (field == "num_experts_per_tok") return c.num_experts_per_tok;
  if (field == "moe_intermediate_size") return c.moe_intermediate_size;
  if (field == "norm_topk_prob") return c.norm_topk_prob;
  if (field == "decoder_sparse_step") return c.moe_layer;
  return "unknown field " + field;
}

struct DefaultCase {
  std::string type;
  std::string field;
  Json want;          // the parsed value without the field
  std::string error;  // or, when set, the refusal names the field and this
};

std::vector<DefaultCase> Cases() {
  // Per type, from transformers' configuration_<type>.py. -1: no token (None). The
  // head_dim and KV-head defaults that depend on the head count are for Full()'s
  // 1024 hidden / 64 heads.
  const std::vector<std::pair<std::string, Json>> defaults = {
      {"llama",  // LlamaConfig
       {{"vocab_size", 32000},
        {"hidden_size", 4096},
        {"intermediate_size", 11008},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 64},
        {"head_dim", 16},
        {"max_position_embeddings", 2048},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"attention_bias", false},
        {"bos_token_id", 1},
        {"eos_token_id", 2}}},
      {"mistral",  // MistralConfig
       {{"vocab_size", 32000},
        {"hidden_size", 4096},
        {"intermediate_size", 14336},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 8},
        {"head_dim", 16},
        {"max_position_embeddings", 131072},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"attention_bias", false},
        {"bos_token_id", 1},
        {"eos_token_id", 2}}},
      {"mixtral",  // MixtralConfig
       {{"vocab_size", 32000},
        {"hidden_size", 4096},
        {"intermediate_size", 14336},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 8},
        {"head_dim", 16},
        {"max_position_embeddings", 131072},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 1e6},
        {"tie_word_embeddings", false},
        {"attention_bias", false},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
        {"num_local_experts", 8},
        {"num_experts_per_tok", 2}}},
      {"qwen2",  // Qwen2Config
       {{"vocab_size", 151936},
        {"hidden_size", 4096},
        {"intermediate_size", 22016},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 32},
        {"head_dim", 16},
        {"max_position_embeddings", 32768},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"bos_token_id", -1},
        {"eos_token_id", -1}}},
      {"qwen2_moe",  // Qwen2MoeConfig
       {{"vocab_size", 151936},
        {"hidden_size", 2048},
        {"intermediate_size", 5632},
        {"num_hidden_layers", 24},
        {"num_attention_heads", 16},
        {"num_key_value_heads", 16},
        {"head_dim", 16},
        {"max_position_embeddings", 32768},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"bos_token_id", -1},
        {"eos_token_id", -1},
        {"num_experts", 60},
        {"num_experts_per_tok", 4},
        {"moe_intermediate_size", 1408},
        {"norm_topk_prob", false},
        {"decoder_sparse_step", {true, true, true}}}},
      {"qwen3_moe",  // Qwen3MoeConfig
       {{"vocab_size", 151936},
        {"hidden_size", 2048},
        {"intermediate_size", 6144},
        {"num_hidden_layers", 24},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 4},
        {"max_position_embeddings", 32768},
        {"rms_norm_eps", 1e-6},
        {"rope_theta", 10000.0},
        {"tie_word_embeddings", false},
        {"attention_bias", false},
        {"bos_token_id", -1},
        {"eos_token_id", -1},
        {"num_experts", 128},
        {"num_experts_per_tok", 8},
        {"moe_intermediate_size", 768},
        {"norm_topk_prob", false},
        {"decoder_sparse_step", {true, true, true}}}},
  };
  std::vector<DefaultCase> cases;
  for (const auto& [type, fields] : defaults) {
    for (const auto& [field, want] : fields.items()) cases.push_back({type, field, want, ""});
  }
  // No default in the class: refused, naming the field and the class.
  cases.push_back({"qwen3_moe", "head_dim", nullptr, "Qwen3MoeConfig"});
  // The class's default (a 5632-wide shared expert) is one the engine does not run.
  cases.push_back({"qwen2_moe", "shared_expert_intermediate_size", nullptr, "5632"});
  return cases;
}

class ModelConfigDefaultsTest : public ::testing::TestWithParam<DefaultCase> {};

TEST_P(ModelConfigDefaultsTest, AbsentFieldTakesTheFamilyDefault) {
  const DefaultCase& c = GetParam();
  Json json = Full(c.type);
  ASSERT_TRUE(json.contains(c.field)) << "Full() must set " << c.field;
  absl::StatusOr<ModelConfig> full = ParseModelConfig(json.dump(), "full/config.json");
  ASSERT_THAT(full, IsOk());
  json.erase(c.field);
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json.dump(), "dir/config.json");
  if (!c.error.empty()) {
    EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument,
                                 AllOf(HasSubstr(c.field), HasSubstr(c.error))));
    return;
  }
  ASSERT_THAT(config, IsOk());
  EXPECT_NE(ParsedValue(*full, c.field), c.want) << "Full() must not give the default";
  EXPECT_EQ(ParsedValue(*config, c.field), c.want);
}

INSTANTIATE_TEST_SUITE_P(EveryTypeAndField, ModelConfigDefaultsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<DefaultCase>& info) {
                           return info.param.type + "_" + info.param.field;
                         });

absl::StatusOr<ModelConfig> Parse(const Json& json) {
  return ParseModelConfig(json.dump(), "dir/config.json");
}

TEST(ModelConfigNullTest, NullKvHeadsIsTheHeadCountWhereTheClassSaysSo) {
  for (const char* type : {"llama", "mistral", "mixtral", "qwen2"}) {
    Json json = Full(type);
    json["num_key_value_heads"] = nullptr;
    ASSERT_THAT(Parse(json), IsOk()) << type;
    EXPECT_EQ(Parse(json)->num_kv_heads, 64) << type;
  }
  for (const char* type : {"qwen2_moe", "qwen3_moe"}) {
    Json json = Full(type);
    json["num_key_value_heads"] = nullptr;
    EXPECT_THAT(Parse(json),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_key_value_heads")))
        << type;
  }
}

TEST(ModelConfigNullTest, NullTokenIsNoTokenAndRoundTrips) {
  Json json = Full("llama");
  json["bos_token_id"] = nullptr;
  json["eos_token_id"] = nullptr;
  absl::StatusOr<ModelConfig> config = Parse(json);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->bos_token_id, -1);
  EXPECT_EQ(config->eos_token_id, -1);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*config), "again");
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->bos_token_id, -1);
  EXPECT_EQ(again->eos_token_id, -1);
}

TEST(ModelConfigWindowTest, MistralWithoutWindowHasMistralsDefaultWindow) {
  Json json = Full("mistral");
  json.erase("sliding_window");
  json["max_position_embeddings"] = 4096;  // the default window covers it
  EXPECT_THAT(Parse(json), IsOk());
  json["max_position_embeddings"] = 8192;
  EXPECT_THAT(Parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("sliding_window"), HasSubstr("4096"),
                                          HasSubstr("MistralConfig"))));
  json["sliding_window"] = nullptr;  // none: full attention
  EXPECT_THAT(Parse(json), IsOk());
  absl::StatusOr<ModelConfig> config = Parse(json);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToJson(*config), "again");
  EXPECT_THAT(again, IsOk());

  Json mixtral = Full("mixtral");
  mixtral["max_position_embeddings"] = 8192;  // MixtralConfig: no window
  EXPECT_THAT(Parse(mixtral), IsOk());
}

TEST(ModelConfigTransformers5Test, RopeParametersGiveTheBase) {
  Json json = Full("mixtral");
  json.erase("rope_theta");
  json["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "default"}};
  ASSERT_THAT(Parse(json), IsOk());
  EXPECT_DOUBLE_EQ(Parse(json)->rope_theta, 5e5);
  json["rope_parameters"] = {{"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(Parse(json)->rope_theta, 1e6);  // MixtralConfig's
  json["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_THAT(Parse(json),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rope_parameters")));
}

TEST(ModelConfigTransformers5Test, ExpertCountUnderEitherName) {
  Json json = Full("qwen3_moe");
  json.erase("num_experts");
  json["num_local_experts"] = 12;  // how transformers 5 writes Qwen3MoeConfig
  ASSERT_THAT(Parse(json), IsOk());
  EXPECT_EQ(Parse(json)->num_experts, 12);
  json["num_experts"] = 10;
  EXPECT_THAT(Parse(json), StatusIs(absl::StatusCode::kInvalidArgument,
                                    AllOf(HasSubstr("num_experts"), HasSubstr("12"))));

  Json mixtral = Full("mixtral");
  mixtral.erase("num_local_experts");
  mixtral["num_experts"] = 12;
  ASSERT_THAT(Parse(mixtral), IsOk());
  EXPECT_EQ(Parse(mixtral)->num_experts, 12);
}

}  // namespace
}  // namespace lockstep::engine
