// The DeepSeek-V3 family's config.json fields (model_type deepseek_v3, kimi_k2): MLA
// sizes, routing, shared experts, YaRN and FP8 quantization. Absent fields take
// DeepseekV3Config's defaults (model_config_defaults.cc); a value the engines do not
// run is refused with the field and the value.
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/engine/model/model_config_defaults.h"
#include "runtime/engine/model/model_config_fields.h"

namespace lockstep::engine::config_internal {
namespace {

using config_defaults::DeepseekDefaults;

// A string field with `fallback` when absent.
absl::StatusOr<std::string> String(const Fields& fields, absl::string_view field,
                                   const char* fallback) {
  const Json* value = fields.Find(field);
  if (value == nullptr) return std::string(fallback);
  if (!value->is_string()) return fields.Error(field, "must be a string");
  return value->get<std::string>();
}

// The keys of `object` (config field `field`) that are not in `known`, as an error.
absl::Status RejectUnknownKeys(const Fields& fields, absl::string_view field, const Json& object,
                               std::initializer_list<absl::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (absl::string_view k : known) found = found || key == k;
    if (!found && !value.is_null()) {
      return fields.Error(field, absl::StrCat(key, " ", value.dump(), " is not supported"));
    }
  }
  return absl::OkStatus();
}

// `rope_scaling` (transformers 4 and the checkpoints) or `rope_parameters` (transformers
// 5, which also carries rope_theta): none, or YaRN.
absl::Status ParseRope(const Fields& fields, const DeepseekDefaults& d, ModelConfig& config) {
  ASSIGN_OR_RETURN(config.rope_theta, fields.Number("rope_theta", 10000.0));
  const char* field = "rope_scaling";
  const Json* params = fields.Find(field);
  if (params == nullptr) {
    field = "rope_parameters";
    params = fields.Find(field);
  }
  if (params == nullptr) return absl::OkStatus();
  if (!params->is_object()) return fields.Error(field, "must be an object");
  const std::string source = absl::StrCat(field);
  const Fields rope(*params, absl::string_view(source));
  auto error = [&](const absl::Status& status) { return fields.Error(field, status.message()); };
  if (std::string(field) == "rope_parameters" && rope.Find("rope_theta") != nullptr) {
    absl::StatusOr<double> theta = rope.Number("rope_theta", config.rope_theta);
    if (!theta.ok()) return error(theta.status());
    config.rope_theta = *theta;
  }
  const Json* type = rope.Find("rope_type");
  if (type == nullptr) type = rope.Find("type");
  if (type == nullptr || *type == Json("default")) return absl::OkStatus();
  if (*type != Json("yarn")) {
    return fields.Error(
        field, absl::StrCat("type ", type->dump(), " is not supported (only yarn or default)"));
  }
  absl::Status known = RejectUnknownKeys(
      fields, field, *params,
      {"type", "rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast",
       "beta_slow", "mscale", "mscale_all_dim"});
  if (!known.ok()) return known;
  YarnScaling& yarn = config.yarn_scaling;
  if (rope.Find("factor") == nullptr) return fields.Error(field, "factor is required for yarn");
  auto number = [&](absl::string_view key, double fallback, double& out) -> absl::Status {
    absl::StatusOr<double> value = rope.Number(key, fallback);
    if (!value.ok()) return error(value.status());
    out = *value;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(number("factor", 1.0, yarn.factor));
  RETURN_IF_ERROR(number("beta_fast", d.yarn_beta_fast, yarn.beta_fast));
  RETURN_IF_ERROR(number("beta_slow", d.yarn_beta_slow, yarn.beta_slow));
  RETURN_IF_ERROR(number("mscale", d.yarn_mscale, yarn.mscale));
  RETURN_IF_ERROR(number("mscale_all_dim", d.yarn_mscale_all_dim, yarn.mscale_all_dim));
  absl::StatusOr<int32_t> original =
      rope.Int("original_max_position_embeddings", config.max_position, 1);
  if (!original.ok()) return error(original.status());
  yarn.original_max_position = *original;
  if (!(yarn.factor >= 1.0)) {
    return fields.Error(field, absl::StrCat("factor ", yarn.factor, " is not supported (< 1)"));
  }
  config.yarn = true;
  return absl::OkStatus();
}

// `quantization_config`: none, or FP8 E4M3 with [128, 128] weight blocks.
absl::Status ParseQuantization(const Fields& fields, ModelConfig& config) {
  const Json* quant = fields.Find("quantization_config");
  if (quant == nullptr) return absl::OkStatus();
  if (!quant->is_object()) return fields.Error("quantization_config", "must be an object");
  auto refuse = [&](absl::string_view key, const Json& value, absl::string_view supported) {
    return fields.Error("quantization_config", absl::StrCat(key, " ", value.dump(),
                                                            " is not supported (", supported, ")"));
  };
  const Json method = quant->value("quant_method", Json());
  if (method != Json("fp8")) return refuse("quant_method", method, "only fp8");
  const Json fmt = quant->value("fmt", Json("e4m3"));
  if (fmt != Json("e4m3")) return refuse("fmt", fmt, "only e4m3");
  const Json scheme = quant->value("activation_scheme", Json("dynamic"));
  if (scheme != Json("dynamic")) return refuse("activation_scheme", scheme, "only dynamic");
  const Json block = quant->value("weight_block_size", Json());
  if (block != Json({128, 128})) return refuse("weight_block_size", block, "only [128, 128]");
  RETURN_IF_ERROR(
      RejectUnknownKeys(fields, "quantization_config", *quant,
                        {"quant_method", "fmt", "activation_scheme", "weight_block_size"}));
  config.fp8 = Fp8Quantization{.enabled = true, .block_rows = 128, .block_cols = 128};
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseDeepseek(const Fields& fields, ModelConfig& config) {
  const DeepseekDefaults& d = config_defaults::kDeepseekV3;
  const config_defaults::FamilyDefaults& family =
      *config_defaults::FindFamilyDefaults(config.model_type);
  if (config.attention_bias) {
    return fields.Error("attention_bias", "true is not supported for MLA (only false)");
  }
  // MLA.
  config.mla = true;
  MlaDims& mla = config.mla_dims;
  if (fields.IsNull("q_lora_rank")) {
    mla.q_lora_rank = 0;
  } else {
    ASSIGN_OR_RETURN(mla.q_lora_rank, fields.Int("q_lora_rank", d.q_lora_rank, 1));
  }
  ASSIGN_OR_RETURN(mla.kv_lora_rank, fields.Int("kv_lora_rank", d.kv_lora_rank, 1));
  ASSIGN_OR_RETURN(mla.qk_nope_head_dim, fields.Int("qk_nope_head_dim", d.qk_nope_head_dim, 1));
  ASSIGN_OR_RETURN(mla.qk_rope_head_dim, fields.Int("qk_rope_head_dim", d.qk_rope_head_dim, 2));
  ASSIGN_OR_RETURN(mla.v_head_dim, fields.Int("v_head_dim", d.v_head_dim, 1));
  config.head_dim = mla.qk_head_dim();
  RETURN_IF_ERROR(ParseRope(fields, d, config));
  RETURN_IF_ERROR(fields.RejectUnless("rope_interleave", "only interleaved RoPE", Json(true)));
  ASSIGN_OR_RETURN(config.num_nextn_predict_layers,
                   fields.Int("num_nextn_predict_layers", d.num_nextn_predict_layers, 0));
  RETURN_IF_ERROR(ParseQuantization(fields, config));

  // MoE. n_routed_experts null: every layer is dense.
  ASSIGN_OR_RETURN(config.first_k_dense_replace,
                   fields.Int("first_k_dense_replace", d.first_k_dense_replace, 0));
  ASSIGN_OR_RETURN(config.moe_layer_freq, fields.Int("moe_layer_freq", d.moe_layer_freq, 1));
  if (fields.IsNull("n_routed_experts")) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int32_t routed, fields.Int("n_routed_experts", family.num_experts, 1));
  ASSIGN_OR_RETURN(std::optional<int64_t> alias, fields.OptionalInt("num_local_experts"));
  if (alias.has_value() && *alias != routed) {
    return fields.Error("n_routed_experts",
                        absl::StrCat(routed, " differs from num_local_experts ", *alias));
  }
  config.num_experts = routed;
  config.moe_naming = MoeNaming::kQwen;  // mlp.gate, mlp.experts.{e}.{gate,up,down}_proj
  ASSIGN_OR_RETURN(config.moe_intermediate_size,
                   fields.Int("moe_intermediate_size", family.moe_intermediate_size, 1));
  ASSIGN_OR_RETURN(config.num_experts_per_tok,
                   fields.Int("num_experts_per_tok", family.num_experts_per_tok, 1));
  ASSIGN_OR_RETURN(config.norm_topk_prob, fields.Bool("norm_topk_prob", family.norm_topk_prob));
  ASSIGN_OR_RETURN(config.n_shared_experts, fields.Int("n_shared_experts", d.n_shared_experts, 0));
  ASSIGN_OR_RETURN(config.routed_scaling_factor,
                   fields.Number("routed_scaling_factor", d.routed_scaling_factor));
  ASSIGN_OR_RETURN(config.n_group, fields.Int("n_group", d.n_group, 1));
  ASSIGN_OR_RETURN(config.topk_group, fields.Int("topk_group", d.topk_group, 1));
  ASSIGN_OR_RETURN(std::string method, String(fields, "topk_method", d.topk_method));
  if (method != "noaux_tc") {
    return fields.Error("topk_method",
                        absl::StrCat("\"", method, "\" is not supported (only noaux_tc)"));
  }
  config.score_correction_bias = true;
  ASSIGN_OR_RETURN(std::string scoring, String(fields, "scoring_func", d.scoring_func));
  if (scoring == "sigmoid") {
    config.scoring = ExpertScoring::kSigmoid;
  } else if (scoring == "softmax") {
    config.scoring = ExpertScoring::kSoftmax;
  } else {
    return fields.Error("scoring_func",
                        absl::StrCat("\"", scoring, "\" is not supported (sigmoid or softmax)"));
  }
  RETURN_IF_ERROR(fields.RejectUnless("ep_size", "ep_size is the serving's choice", Json(1)));
  config.moe_layer.resize(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    config.moe_layer[i] = i >= config.first_k_dense_replace && i % config.moe_layer_freq == 0;
  }
  return absl::OkStatus();
}

void DeepseekToJson(const ModelConfig& config, Json& json) {
  const MlaDims& mla = config.mla_dims;
  json["q_lora_rank"] = mla.q_lora_rank > 0 ? Json(mla.q_lora_rank) : Json(nullptr);
  json["kv_lora_rank"] = mla.kv_lora_rank;
  json["qk_nope_head_dim"] = mla.qk_nope_head_dim;
  json["qk_rope_head_dim"] = mla.qk_rope_head_dim;
  json["v_head_dim"] = mla.v_head_dim;
  json["attention_bias"] = false;
  json["rope_interleave"] = true;
  json["num_nextn_predict_layers"] = config.num_nextn_predict_layers;
  json["first_k_dense_replace"] = config.first_k_dense_replace;
  json["moe_layer_freq"] = config.moe_layer_freq;
  if (config.is_moe()) {
    json["n_routed_experts"] = config.num_experts;
    json["num_experts_per_tok"] = config.num_experts_per_tok;
    json["moe_intermediate_size"] = config.moe_intermediate_size;
    json["norm_topk_prob"] = config.norm_topk_prob;
    json["n_shared_experts"] = config.n_shared_experts;
    json["routed_scaling_factor"] = config.routed_scaling_factor;
    json["n_group"] = config.n_group;
    json["topk_group"] = config.topk_group;
    json["topk_method"] = "noaux_tc";
    json["scoring_func"] = config.scoring == ExpertScoring::kSigmoid ? "sigmoid" : "softmax";
  } else {
    json["n_routed_experts"] = nullptr;
  }
  if (config.yarn) {
    const YarnScaling& y = config.yarn_scaling;
    json["rope_scaling"] = {{"type", "yarn"},
                            {"factor", y.factor},
                            {"original_max_position_embeddings", y.original_max_position},
                            {"beta_fast", y.beta_fast},
                            {"beta_slow", y.beta_slow},
                            {"mscale", y.mscale},
                            {"mscale_all_dim", y.mscale_all_dim}};
  } else {
    json["rope_scaling"] = nullptr;
  }
  if (config.fp8.enabled) {
    json["quantization_config"] = {{"quant_method", "fp8"},
                                   {"fmt", "e4m3"},
                                   {"activation_scheme", "dynamic"},
                                   {"weight_block_size", {128, 128}}};
  }
}

}  // namespace lockstep::engine::config_internal
