#include "runtime/engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/model_config_defaults.h"
#include "runtime/engine/model/model_config_fields.h"

namespace lockstep::engine {
namespace {

using Json = nlohmann::json;
using config_defaults::FamilyDefaults;
using config_internal::Fields;

bool IsMixtralLike(const std::string& type) { return type == "mistral" || type == "mixtral"; }
bool IsQwenMoe(const std::string& type) { return type == "qwen2_moe" || type == "qwen3_moe"; }

// What an absent integer field of `config` falls back to, by its row value `entry`
// (model_config_defaults.h); nullopt when the field is required.
std::optional<int64_t> Fallback(int64_t entry, const ModelConfig& config) {
  switch (entry) {
    case config_defaults::kRequired:
      return std::nullopt;
    case config_defaults::kNone:
      return -1;
    case config_defaults::kAttentionHeads:
      return config.num_heads;
    case config_defaults::kHiddenPerHead:
      return config.hidden_size / config.num_heads;
    default:
      return entry;
  }
}

// The error for a field that `family`'s transformers class gives no default.
absl::Status NoDefault(const Fields& fields, absl::string_view field, absl::string_view problem,
                       const FamilyDefaults& family) {
  return fields.Error(
      field, absl::StrCat(problem, " (", family.transformers_class, " gives no default for it)"));
}

// Integer `field` (>= `min_value`), or when absent its fallback by the row value `entry`.
absl::StatusOr<int32_t> IntField(const Fields& fields, const FamilyDefaults& family,
                                 const ModelConfig& config, absl::string_view field, int64_t entry,
                                 int64_t min_value) {
  const std::optional<int64_t> fallback = Fallback(entry, config);
  if (!fallback.has_value() && fields.Find(field) == nullptr) {
    return NoDefault(fields, field, "is required", family);
  }
  return fields.Int(field, fallback, min_value);
}

// RoPE's base: `rope_theta`, else transformers 5's `rope_parameters.rope_theta`, else
// the family's default. Only the default RoPE type is supported.
absl::StatusOr<double> RopeTheta(const Fields& fields, const FamilyDefaults& family) {
  double theta = family.rope_theta;
  if (const Json* params = fields.Find("rope_parameters")) {
    if (!params->is_object()) return fields.Error("rope_parameters", "must be an object");
    const auto type = params->find("rope_type");
    if (type != params->end() && !type->is_null() && *type != Json("default")) {
      return fields.Error("rope_parameters", absl::StrCat("rope_type ", type->dump(),
                                                          " is not supported (rope scaling)"));
    }
    const auto base = params->find("rope_theta");
    if (base != params->end() && !base->is_null()) {
      if (!base->is_number()) return fields.Error("rope_parameters", "rope_theta must be a number");
      theta = base->get<double>();
    }
  }
  return fields.Number("rope_theta", theta);
}

// An expert count that transformers reads under two names (`name`, or `alias` through
// the class's attribute_map); `fallback` when neither is given.
absl::StatusOr<int32_t> ExpertCount(const Fields& fields, absl::string_view name,
                                    absl::string_view alias, int64_t fallback) {
  ASSIGN_OR_RETURN(std::optional<int64_t> other, fields.OptionalInt(alias));
  ASSIGN_OR_RETURN(std::optional<int64_t> given, fields.OptionalInt(name));
  if (given.has_value() && other.has_value() && *given != *other) {
    return fields.Error(name, absl::StrCat(*given, " differs from ", alias, " ", *other));
  }
  return fields.Int(given.has_value() || !other.has_value() ? name : alias, fallback, 1);
}

// Mistral-style `sliding_window` (absent: the family's default; null: none): fine when
// there is none or it is never reached.
absl::Status CheckSlidingWindow(const Fields& fields, int64_t max_position,
                                const FamilyDefaults& family) {
  ASSIGN_OR_RETURN(std::optional<int64_t> window, fields.OptionalInt("sliding_window"));
  std::string absent;
  if (!window.has_value() && !fields.IsNull("sliding_window") &&
      family.sliding_window != config_defaults::kNone) {
    window = family.sliding_window;
    absent = absl::StrCat(" (absent: ", family.transformers_class, "'s default; null for none)");
  }
  if (window.has_value() && *window < max_position) {
    return fields.Error("sliding_window",
                        absl::StrCat(*window, absent,
                                     " is not supported (sliding-window attention; "
                                     "only a window >= max_position_embeddings)"));
  }
  return absl::OkStatus();
}

absl::Status ParseMoe(const Fields& fields, const FamilyDefaults& family, ModelConfig& config) {
  const std::string& type = config.model_type;
  if (type == "mixtral") {
    ASSIGN_OR_RETURN(config.num_experts,
                     ExpertCount(fields, "num_local_experts", "num_experts", family.num_experts));
    config.moe_intermediate_size = config.intermediate_size;
    config.norm_topk_prob = family.norm_topk_prob;  // no field: always renormalised
    config.moe_naming = MoeNaming::kMixtral;
    config.moe_layer.assign(config.num_layers, true);
  } else {
    if (type == "qwen3_moe") {
      ASSIGN_OR_RETURN(config.num_experts,
                       ExpertCount(fields, "num_experts", "num_local_experts", family.num_experts));
    } else {
      ASSIGN_OR_RETURN(config.num_experts, fields.Int("num_experts", family.num_experts, 1));
    }
    ASSIGN_OR_RETURN(config.moe_intermediate_size,
                     fields.Int("moe_intermediate_size", family.moe_intermediate_size, 1));
    ASSIGN_OR_RETURN(config.norm_topk_prob, fields.Bool("norm_topk_prob", family.norm_topk_prob));
    config.moe_naming = MoeNaming::kQwen;
    // Hugging Face builds a shared expert unless its width is 0 (absent: the family's).
    ASSIGN_OR_RETURN(std::optional<int64_t> shared,
                     fields.OptionalInt("shared_expert_intermediate_size"));
    if (shared.value_or(family.shared_expert_intermediate_size) != 0) {
      return fields.Error("shared_expert_intermediate_size",
                          absl::StrCat(shared.value_or(family.shared_expert_intermediate_size),
                                       ": shared experts are not supported (must be 0)"));
    }
    ASSIGN_OR_RETURN(int32_t sparse_step,
                     fields.Int("decoder_sparse_step", family.decoder_sparse_step, 1));
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
  ASSIGN_OR_RETURN(config.num_experts_per_tok,
                   fields.Int("num_experts_per_tok", family.num_experts_per_tok, 1));
  if (config.num_experts_per_tok > config.num_experts) {
    return fields.Error(
        "num_experts_per_tok",
        absl::StrCat(config.num_experts_per_tok, " exceeds the ", config.num_experts, " experts"));
  }
  return absl::OkStatus();
}

}  // namespace

double YarnScaling::Mscale(double m) const {
  return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

double YarnScaling::RopeMagnitude() const { return Mscale(mscale) / Mscale(mscale_all_dim); }

double YarnScaling::SoftmaxFactor() const {
  const double m = Mscale(mscale_all_dim);
  return m * m;
}

double ModelConfig::softmax_scale() const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  return yarn ? scale * yarn_scaling.SoftmaxFactor() : scale;
}

absl::Status ModelConfig::Validate() const {
  auto error = [](absl::string_view field, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
  };
  if (vocab_size < 1) return error("vocab_size", "must be >= 1");
  if (hidden_size < 1) return error("hidden_size", "must be >= 1");
  if (num_layers < 1) return error("num_hidden_layers", "must be >= 1");
  if (num_heads < 1) return error("num_attention_heads", "must be >= 1");
  // MLA has no KV heads: num_key_value_heads is read and kept, not used.
  if (num_kv_heads < 1 || (!mla && num_heads % num_kv_heads != 0)) {
    return error("num_key_value_heads",
                 absl::StrCat(num_kv_heads, " must divide num_attention_heads ", num_heads));
  }
  if (mla) {
    if (mla_dims.qk_rope_head_dim < 2 || mla_dims.qk_rope_head_dim % 2 != 0) {
      return error("qk_rope_head_dim", absl::StrCat("must be even and >= 2 (rotary pairs), got ",
                                                    mla_dims.qk_rope_head_dim));
    }
    if (mla_dims.kv_lora_rank < 1) return error("kv_lora_rank", "must be >= 1");
    if (mla_dims.qk_nope_head_dim < 1) return error("qk_nope_head_dim", "must be >= 1");
    if (mla_dims.v_head_dim < 1) return error("v_head_dim", "must be >= 1");
    if (mla_dims.q_lora_rank < 0) return error("q_lora_rank", "must be >= 1 or null");
    if (head_dim != mla_dims.qk_head_dim()) {
      return error("head_dim", "must be qk_nope_head_dim + qk_rope_head_dim under MLA");
    }
  } else if (head_dim < 2 || head_dim % 2 != 0) {
    return error("head_dim", absl::StrCat("must be even and >= 2 (rotary pairs), got ", head_dim));
  }
  if (yarn && !(yarn_scaling.factor >= 1.0)) {
    return error("rope_scaling", absl::StrCat("factor must be >= 1, got ", yarn_scaling.factor));
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
      return error("num_experts_per_tok", absl::StrCat(num_experts_per_tok, " must be in [1, ",
                                                       num_experts, "] (the experts)"));
    }
    if (moe_intermediate_size < 1) return error("moe_intermediate_size", "must be >= 1");
    if (n_group < 1 || num_experts % n_group != 0) {
      return error("n_group", absl::StrCat(n_group, " must divide n_routed_experts ", num_experts));
    }
    if (topk_group < 1 || topk_group > n_group) {
      return error("topk_group",
                   absl::StrCat(topk_group, " must be in [1, n_group ", n_group, "]"));
    }
    if (num_experts_per_tok > topk_group * (num_experts / n_group)) {
      return error("num_experts_per_tok",
                   absl::StrCat(num_experts_per_tok, " exceeds the experts of topk_group ",
                                topk_group, " groups"));
    }
    if (n_shared_experts < 0) return error("n_shared_experts", "must be >= 0");
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
  const FamilyDefaults* found = config_defaults::FindFamilyDefaults(t);
  if (found == nullptr) {
    return fields.Error("model_type", absl::StrCat("'", t, "' is not supported (supported: ",
                                                   config_defaults::SupportedModelTypes(), ")"));
  }
  // Absent fields take the family's defaults (model_config_defaults.cc).
  const FamilyDefaults& family = *found;
  auto int_field = [&](absl::string_view field, int64_t entry, int64_t min_value) {
    return IntField(fields, family, config, field, entry, min_value);
  };
  ASSIGN_OR_RETURN(config.vocab_size, int_field("vocab_size", family.vocab_size, 1));
  ASSIGN_OR_RETURN(config.hidden_size, int_field("hidden_size", family.hidden_size, 1));
  ASSIGN_OR_RETURN(config.intermediate_size,
                   int_field("intermediate_size", family.intermediate_size, 0));
  ASSIGN_OR_RETURN(config.num_layers, int_field("num_hidden_layers", family.num_hidden_layers, 1));
  ASSIGN_OR_RETURN(config.num_heads,
                   int_field("num_attention_heads", family.num_attention_heads, 1));
  if (fields.IsNull("num_key_value_heads") &&
      family.num_key_value_heads_if_null == config_defaults::kRequired) {
    return NoDefault(fields, "num_key_value_heads", "is null", family);
  }
  ASSIGN_OR_RETURN(config.num_kv_heads, int_field("num_key_value_heads",
                                                  fields.IsNull("num_key_value_heads")
                                                      ? family.num_key_value_heads_if_null
                                                      : family.num_key_value_heads,
                                                  1));
  const bool deepseek = family.deepseek != nullptr;
  if (!deepseek) {  // the DeepSeek family's head sizes and RoPE: ParseDeepseek
    ASSIGN_OR_RETURN(config.head_dim, int_field("head_dim", family.head_dim, 1));
    ASSIGN_OR_RETURN(config.rope_theta, RopeTheta(fields, family));
  }
  ASSIGN_OR_RETURN(config.rms_norm_eps, fields.Number("rms_norm_eps", family.rms_norm_eps));
  ASSIGN_OR_RETURN(int32_t max_position,
                   int_field("max_position_embeddings", family.max_position_embeddings, 1));
  config.max_position = max_position;
  ASSIGN_OR_RETURN(config.tie_word_embeddings,
                   fields.Bool("tie_word_embeddings", family.tie_word_embeddings));
  ASSIGN_OR_RETURN(
      config.bos_token_id,
      fields.TokenId("bos_token_id", static_cast<int32_t>(*Fallback(family.bos_token_id, config))));
  ASSIGN_OR_RETURN(
      config.eos_token_id,
      fields.TokenId("eos_token_id", static_cast<int32_t>(*Fallback(family.eos_token_id, config))));

  RETURN_IF_ERROR(fields.RejectUnless("hidden_act", "only silu", Json("silu")));
  if (!deepseek) RETURN_IF_ERROR(fields.RejectUnless("rope_scaling", "rope scaling"));
  RETURN_IF_ERROR(fields.RejectUnless("mlp_bias", "MLP bias", Json(false)));
  RETURN_IF_ERROR(fields.RejectUnless("partial_rotary_factor", "partial rotary", Json(1.0)));
  if (IsMixtralLike(t)) RETURN_IF_ERROR(CheckSlidingWindow(fields, config.max_position, family));
  if (t == "qwen2" || IsQwenMoe(t)) {
    RETURN_IF_ERROR(
        fields.RejectUnless("use_sliding_window", "sliding-window attention", Json(false)));
  }
  if (t == "qwen2" || t == "qwen2_moe") {
    config.attention_bias = family.attention_bias;  // fixed by their modeling code
  } else {
    ASSIGN_OR_RETURN(config.attention_bias, fields.Bool("attention_bias", family.attention_bias));
  }
  config.qk_norm = t == "qwen3_moe";
  if (t == "mixtral" || IsQwenMoe(t)) RETURN_IF_ERROR(ParseMoe(fields, family, config));
  if (deepseek) RETURN_IF_ERROR(config_internal::ParseDeepseek(fields, config));

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
  // null, not absent, for no token: absent means the family's default token.
  json["bos_token_id"] = config.bos_token_id >= 0 ? Json(config.bos_token_id) : Json(nullptr);
  json["eos_token_id"] = config.eos_token_id >= 0 ? Json(config.eos_token_id) : Json(nullptr);
  const std::string& t = config.model_type;
  // DeepseekV3Config derives head_dim (a given one would change transformers' RoPE).
  if (config.is_deepseek()) json.erase("head_dim");
  if (t == "llama" || t == "qwen3_moe") json["attention_bias"] = config.attention_bias;
  if (IsMixtralLike(t)) json["sliding_window"] = nullptr;  // absent: mistral's 4096
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
  if (config.is_deepseek()) config_internal::DeepseekToJson(config, json);
  static const std::pair<const char*, const char*> kArchitectures[] = {
      {"llama", "LlamaForCausalLM"},
      {"mistral", "MistralForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},
      {"mixtral", "MixtralForCausalLM"},
      {"qwen2_moe", "Qwen2MoeForCausalLM"},
      {"qwen3_moe", "Qwen3MoeForCausalLM"},
      {"deepseek_v3", "DeepseekV3ForCausalLM"},
      {"kimi_k2", "DeepseekV3ForCausalLM"}};
  for (const auto& [type, architecture] : kArchitectures) {
    if (t == type) json["architectures"].push_back(architecture);
  }
  return json.dump(2) + "\n";
}

}  // namespace lockstep::engine
