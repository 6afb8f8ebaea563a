#include "runtime/engine/model_config.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/file_io.h"

namespace lockstep::engine {
namespace {

using Json = nlohmann::json;

constexpr const char* kSupportedTypes = "llama, mistral, qwen2, mixtral, qwen2_moe, qwen3_moe";

// Typed, non-throwing access to the fields of a config object; errors name the field.
class Fields {
 public:
  Fields(const Json& json, absl::string_view source) : json_(json), source_(source) {}

  absl::Status Error(absl::string_view field, absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", field, ": ", problem));
  }

  // Absent and null both read as nullptr.
  const Json* Find(absl::string_view field) const {
    auto it = json_.find(std::string(field));
    if (it == json_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(absl::string_view field) const {
    const Json* value = Find(field);
    if (value == nullptr) return std::optional<int64_t>();
    if (!value->is_number_integer()) return Error(field, "must be an integer");
    return std::optional<int64_t>(value->get<int64_t>());
  }

  absl::StatusOr<int32_t> Int(absl::string_view field, std::optional<int64_t> fallback,
                              int64_t min_value) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(field));
    if (!value.has_value()) {
      if (!fallback.has_value()) return Error(field, "is required");
      value = fallback;
    }
    if (*value < min_value || *value > (int64_t{1} << 31) - 1) {
      return Error(field, absl::StrCat("must be >= ", min_value, ", got ", *value));
    }
    return static_cast<int32_t>(*value);
  }

  absl::StatusOr<double> Number(absl::string_view field, double fallback) const {
    const Json* value = Find(field);
    if (value == nullptr) return fallback;
    if (!value->is_number()) return Error(field, "must be a number");
    return value->get<double>();
  }

  absl::StatusOr<bool> Bool(absl::string_view field, bool fallback) const {
    const Json* value = Find(field);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) return Error(field, "must be true or false");
    return value->get<bool>();
  }

  // An int or a list of ints (the first is used), e.g. eos_token_id.
  absl::StatusOr<int32_t> TokenId(absl::string_view field) const {
    const Json* value = Find(field);
    if (value == nullptr) return -1;
    const Json* first = value;
    if (value->is_array()) {
      if (value->empty()) return -1;
      first = &(*value)[0];
    }
    if (!first->is_number_integer() || first->get<int64_t>() < 0) {
      return Error(field, "must be a non-negative integer or a list of them");
    }
    return static_cast<int32_t>(first->get<int64_t>());
  }

  // Rejects a feature the engine does not implement: present, not null, and not
  // `allowed` (when given).
  absl::Status RejectUnless(absl::string_view field, absl::string_view feature,
                            const std::optional<Json>& allowed = std::nullopt) const {
    const Json* value = Find(field);
    if (value == nullptr) return absl::OkStatus();
    if (allowed.has_value() && *value == *allowed) return absl::OkStatus();
    return Error(field, absl::StrCat(value->dump(), " is not supported (", feature, ")"));
  }

 private:
  const Json& json_;
  absl::string_view source_;
};

bool IsMixtralLike(const std::string& type) { return type == "mistral" || type == "mixtral"; }
bool IsQwenMoe(const std::string& type) { return type == "qwen2_moe" || type == "qwen3_moe"; }

// Mistral-style `sliding_window`: fine when absent, null, or never reached.
absl::Status CheckSlidingWindow(const Fields& fields, int64_t max_position) {
  ASSIGN_OR_RETURN(std::optional<int64_t> window, fields.OptionalInt("sliding_window"));
  if (window.has_value() && *window < max_position) {
    return fields.Error("sliding_window",
                        absl::StrCat(*window,
                                     " is not supported (sliding-window attention; "
                                     "only a window >= max_position_embeddings)"));
  }
  return absl::OkStatus();
}

absl::Status ParseMoe(const Fields& fields, ModelConfig& config) {
  const std::string& type = config.model_type;
  if (type == "mixtral") {
    ASSIGN_OR_RETURN(config.num_experts, fields.Int("num_local_experts", std::nullopt, 1));
    config.moe_intermediate_size = config.intermediate_size;
    config.norm_topk_prob = true;
    config.moe_naming = MoeNaming::kMixtral;
    config.moe_layer.assign(config.num_layers, true);
  } else {
    ASSIGN_OR_RETURN(config.num_experts, fields.Int("num_experts", std::nullopt, 1));
    ASSIGN_OR_RETURN(config.moe_intermediate_size,
                     fields.Int("moe_intermediate_size", std::nullopt, 1));
    ASSIGN_OR_RETURN(config.norm_topk_prob, fields.Bool("norm_topk_prob", false));
    config.moe_naming = MoeNaming::kQwen;
    if (type == "qwen2_moe") {
      // Hugging Face builds a shared expert unless its width is explicitly 0.
      ASSIGN_OR_RETURN(std::optional<int64_t> shared,
                       fields.OptionalInt("shared_expert_intermediate_size"));
      if (!shared.has_value() || *shared != 0) {
        return fields.Error("shared_expert_intermediate_size",
                            "shared experts are not supported (must be 0)");
      }
    }
    ASSIGN_OR_RETURN(int32_t sparse_step, fields.Int("decoder_sparse_step", 1, 1));
    std::vector<bool> dense(config.num_layers, false);
    if (const Json* only = fields.Find("mlp_only_layers")) {
      if (!only->is_array()) return fields.Error("mlp_only_layers", "must be a list");
      for (const Json& layer : *only) {
        if (!layer.is_number_integer() || layer.get<int64_t>() < 0 ||
            layer.get<int64_t>() >= config.num_layers) {
          return fields.Error("mlp_only_layers", absl::StrCat("bad layer index ", layer.dump()));
        }
        dense[layer.get<int64_t>()] = true;
      }
    }
    config.moe_layer.resize(config.num_layers);
    for (int i = 0; i < config.num_layers; ++i) {
      config.moe_layer[i] = !dense[i] && (i + 1) % sparse_step == 0;
    }
  }
  ASSIGN_OR_RETURN(config.num_experts_per_tok, fields.Int("num_experts_per_tok", std::nullopt, 1));
  if (config.num_experts_per_tok > config.num_experts) {
    return fields.Error(
        "num_experts_per_tok",
        absl::StrCat(config.num_experts_per_tok, " exceeds the ", config.num_experts, " experts"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  auto error = [](absl::string_view field, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
  };
  if (vocab_size < 1) return error("vocab_size", "must be >= 1");
  if (hidden_size < 1) return error("hidden_size", "must be >= 1");
  if (num_layers < 1) return error("num_hidden_layers", "must be >= 1");
  if (num_heads < 1) return error("num_attention_heads", "must be >= 1");
  if (num_kv_heads < 1 || num_heads % num_kv_heads != 0) {
    return error("num_key_value_heads",
                 absl::StrCat(num_kv_heads, " must divide num_attention_heads ", num_heads));
  }
  if (head_dim < 2 || head_dim % 2 != 0) {
    return error("head_dim", absl::StrCat("must be even and >= 2 (rotary pairs), got ", head_dim));
  }
  if (max_position < 1) return error("max_position_embeddings", "must be >= 1");
  if (!(rms_norm_eps > 0.0)) return error("rms_norm_eps", "must be > 0");
  if (!(rope_theta > 0.0)) return error("rope_theta", "must be > 0");
  if (static_cast<int>(moe_layer.size()) != (is_moe() ? num_layers : 0)) {
    return error("moe_layer", "must have one entry per layer for a MoE model");
  }
  const bool any_dense = !is_moe() || std::count(moe_layer.begin(), moe_layer.end(), false) > 0;
  if (any_dense && intermediate_size < 1) return error("intermediate_size", "must be >= 1");
  if (is_moe()) {
    if (num_experts_per_tok < 1 || num_experts_per_tok > num_experts) {
      return error("num_experts_per_tok", "must be in [1, num_experts]");
    }
    if (moe_intermediate_size < 1) return error("moe_intermediate_size", "must be >= 1");
  }
  if (eos_token_id >= vocab_size) return error("eos_token_id", "is outside the vocabulary");
  if (bos_token_id >= vocab_size) return error("bos_token_id", "is outside the vocabulary");
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source) {
  const Json json = Json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  const Fields fields(json, source);
  ModelConfig config;
  const Json* type = fields.Find("model_type");
  if (type == nullptr || !type->is_string()) {
    return fields.Error("model_type", "is required (a string)");
  }
  config.model_type = type->get<std::string>();
  const std::string& t = config.model_type;
  if (t != "llama" && !IsMixtralLike(t) && t != "qwen2" && !IsQwenMoe(t)) {
    return fields.Error(
        "model_type",
        absl::StrCat("'", t, "' is not supported (supported: ", kSupportedTypes, ")"));
  }
  ASSIGN_OR_RETURN(config.vocab_size, fields.Int("vocab_size", std::nullopt, 1));
  ASSIGN_OR_RETURN(config.hidden_size, fields.Int("hidden_size", std::nullopt, 1));
  ASSIGN_OR_RETURN(config.intermediate_size, fields.Int("intermediate_size", int64_t{0}, 0));
  ASSIGN_OR_RETURN(config.num_layers, fields.Int("num_hidden_layers", std::nullopt, 1));
  ASSIGN_OR_RETURN(config.num_heads, fields.Int("num_attention_heads", std::nullopt, 1));
  ASSIGN_OR_RETURN(config.num_kv_heads, fields.Int("num_key_value_heads", config.num_heads, 1));
  if (t == "qwen3_moe") {
    ASSIGN_OR_RETURN(config.head_dim, fields.Int("head_dim", std::nullopt, 1));
  } else {
    ASSIGN_OR_RETURN(config.head_dim,
                     fields.Int("head_dim", config.hidden_size / config.num_heads, 1));
  }
  ASSIGN_OR_RETURN(config.rms_norm_eps, fields.Number("rms_norm_eps", 1e-6));
  ASSIGN_OR_RETURN(config.rope_theta, fields.Number("rope_theta", 10000.0));
  ASSIGN_OR_RETURN(int32_t max_position, fields.Int("max_position_embeddings", std::nullopt, 1));
  config.max_position = max_position;
  ASSIGN_OR_RETURN(config.tie_word_embeddings, fields.Bool("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(config.bos_token_id, fields.TokenId("bos_token_id"));
  ASSIGN_OR_RETURN(config.eos_token_id, fields.TokenId("eos_token_id"));

  RETURN_IF_ERROR(fields.RejectUnless("hidden_act", "only silu", Json("silu")));
  RETURN_IF_ERROR(fields.RejectUnless("rope_scaling", "rope scaling"));
  RETURN_IF_ERROR(fields.RejectUnless("mlp_bias", "MLP bias", Json(false)));
  RETURN_IF_ERROR(fields.RejectUnless("partial_rotary_factor", "partial rotary", Json(1.0)));
  if (IsMixtralLike(t)) RETURN_IF_ERROR(CheckSlidingWindow(fields, config.max_position));
  if (t == "qwen2" || IsQwenMoe(t)) {
    RETURN_IF_ERROR(
        fields.RejectUnless("use_sliding_window", "sliding-window attention", Json(false)));
  }
  if (t == "qwen2" || t == "qwen2_moe") {
    config.attention_bias = true;
  } else {
    ASSIGN_OR_RETURN(config.attention_bias, fields.Bool("attention_bias", false));
  }
  config.qk_norm = t == "qwen3_moe";
  if (t == "mixtral" || IsQwenMoe(t)) RETURN_IF_ERROR(ParseMoe(fields, config));

  absl::Status valid = config.Validate();
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", valid.message()));
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path = JoinPath(dir, "config.json");
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseModelConfig(text, path);
}

std::string ModelConfigToJson(const ModelConfig& config) {
  Json json = {
      {"model_type", config.model_type},
      {"architectures", Json::array()},
      {"vocab_size", config.vocab_size},
      {"hidden_size", config.hidden_size},
      {"intermediate_size", config.intermediate_size},
      {"num_hidden_layers", config.num_layers},
      {"num_attention_heads", config.num_heads},
      {"num_key_value_heads", config.num_kv_heads},
      {"head_dim", config.head_dim},
      {"rms_norm_eps", config.rms_norm_eps},
      {"rope_theta", config.rope_theta},
      {"max_position_embeddings", config.max_position},
      {"tie_word_embeddings", config.tie_word_embeddings},
      {"hidden_act", "silu"},
      {"torch_dtype", "float32"},
  };
  if (config.bos_token_id >= 0) json["bos_token_id"] = config.bos_token_id;
  if (config.eos_token_id >= 0) json["eos_token_id"] = config.eos_token_id;
  const std::string& t = config.model_type;
  if (t == "llama" || t == "qwen3_moe") json["attention_bias"] = config.attention_bias;
  if (t == "mixtral") {
    json["num_local_experts"] = config.num_experts;
    json["num_experts_per_tok"] = config.num_experts_per_tok;
  } else if (IsQwenMoe(t)) {
    json["num_experts"] = config.num_experts;
    json["num_experts_per_tok"] = config.num_experts_per_tok;
    json["moe_intermediate_size"] = config.moe_intermediate_size;
    json["norm_topk_prob"] = config.norm_topk_prob;
    json["decoder_sparse_step"] = 1;
    Json dense = Json::array();
    for (int i = 0; i < static_cast<int>(config.moe_layer.size()); ++i) {
      if (!config.moe_layer[i]) dense.push_back(i);
    }
    json["mlp_only_layers"] = dense;
    if (t == "qwen2_moe") json["shared_expert_intermediate_size"] = 0;
  }
  static const std::pair<const char*, const char*> kArchitectures[] = {
      {"llama", "LlamaForCausalLM"},        {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},        {"mixtral", "MixtralForCausalLM"},
      {"qwen2_moe", "Qwen2MoeForCausalLM"}, {"qwen3_moe", "Qwen3MoeForCausalLM"}};
  for (const auto& [type, architecture] : kArchitectures) {
    if (t == type) json["architectures"].push_back(architecture);
  }
  return json.dump(2) + "\n";
}

}  // namespace lockstep::engine
