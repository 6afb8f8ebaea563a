#include "runtime/engine/model/tensor_names.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine {
namespace {

const char* DensePartName(ExpertPart part) {
  switch (part) {
    case ExpertPart::kGate:
      return "gate_proj";
    case ExpertPart::kUp:
      return "up_proj";
    case ExpertPart::kDown:
      return "down_proj";
  }
  return "?";
}

const char* MixtralPartName(ExpertPart part) {
  switch (part) {
    case ExpertPart::kGate:
      return "w1";
    case ExpertPart::kUp:
      return "w3";
    case ExpertPart::kDown:
      return "w2";
  }
  return "?";
}

}  // namespace

std::string EmbeddingName() { return "model.embed_tokens.weight"; }
std::string FinalNormName() { return "model.norm.weight"; }
std::string LmHeadName() { return "lm_head.weight"; }

std::string LayerName(int layer, const std::string& suffix) {
  return absl::StrCat("model.layers.", layer, ".", suffix);
}

std::string AttentionName(int layer, const std::string& proj, const std::string& kind) {
  return LayerName(layer, absl::StrCat("self_attn.", proj, ".", kind));
}

std::string DenseMlpName(int layer, ExpertPart part) {
  return LayerName(layer, absl::StrCat("mlp.", DensePartName(part), ".weight"));
}

std::string RouterName(const ModelConfig& config, int layer) {
  return LayerName(layer, config.moe_naming == MoeNaming::kMixtral ? "block_sparse_moe.gate.weight"
                                                                   : "mlp.gate.weight");
}

std::string ExpertName(const ModelConfig& config, int layer, int expert, ExpertPart part) {
  if (config.moe_naming == MoeNaming::kMixtral) {
    return LayerName(layer, absl::StrCat("block_sparse_moe.experts.", expert, ".",
                                         MixtralPartName(part), ".weight"));
  }
  return LayerName(layer,
                   absl::StrCat("mlp.experts.", expert, ".", DensePartName(part), ".weight"));
}

std::string SharedExpertName(int layer, ExpertPart part) {
  return LayerName(layer, absl::StrCat("mlp.shared_experts.", DensePartName(part), ".weight"));
}

std::string RouterBiasName(int layer) {
  return LayerName(layer, "mlp.gate.e_score_correction_bias");
}

std::string MlaName(int layer, const std::string& tensor) {
  return LayerName(layer, absl::StrCat("self_attn.", tensor, ".weight"));
}

namespace {

// The SwiGLU block of `width` whose tensors `name(part)` names.
template <typename NameOf>
void AppendSwiGlu(int layer, int64_t hidden, int64_t width, const NameOf& name,
                  std::vector<TensorSpec>& specs) {
  specs.push_back({name(ExpertPart::kGate), {width, hidden}, TensorRole::kMlpIn, layer});
  specs.push_back({name(ExpertPart::kUp), {width, hidden}, TensorRole::kMlpIn, layer});
  specs.push_back({name(ExpertPart::kDown), {hidden, width}, TensorRole::kMlpOut, layer});
}

// MLA's attention tensors of layer `i`.
void AppendMla(const ModelConfig& config, int i, std::vector<TensorSpec>& specs) {
  const MlaDims& m = config.mla_dims;
  const int64_t hidden = config.hidden_size;
  const int64_t heads = config.num_heads;
  if (m.q_lora_rank > 0) {
    specs.push_back({MlaName(i, "q_a_proj"), {m.q_lora_rank, hidden}, TensorRole::kAttentionIn, i});
    specs.push_back({MlaName(i, "q_a_layernorm"), {m.q_lora_rank}, TensorRole::kNorm, i});
    specs.push_back({MlaName(i, "q_b_proj"),
                     {heads * m.qk_head_dim(), m.q_lora_rank},
                     TensorRole::kAttentionIn,
                     i});
  } else {
    specs.push_back(
        {MlaName(i, "q_proj"), {heads * m.qk_head_dim(), hidden}, TensorRole::kAttentionIn, i});
  }
  specs.push_back(
      {MlaName(i, "kv_a_proj_with_mqa"), {m.latent_dim(), hidden}, TensorRole::kAttentionIn, i});
  specs.push_back({MlaName(i, "kv_a_layernorm"), {m.kv_lora_rank}, TensorRole::kNorm, i});
  specs.push_back({MlaName(i, "kv_b_proj"),
                   {heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank},
                   TensorRole::kAttentionIn,
                   i});
  specs.push_back(
      {MlaName(i, "o_proj"), {hidden, heads * m.v_head_dim}, TensorRole::kAttentionOut, i});
}

bool IsProjection(TensorRole role) {
  return role == TensorRole::kAttentionIn || role == TensorRole::kAttentionOut ||
         role == TensorRole::kMlpIn || role == TensorRole::kMlpOut;
}

}  // namespace

std::vector<TensorSpec> ModelTensorSpecs(const ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  std::vector<TensorSpec> specs;
  specs.push_back({EmbeddingName(), {config.vocab_size, hidden}, TensorRole::kEmbedding});
  for (int i = 0; i < config.num_layers; ++i) {
    specs.push_back({LayerName(i, "input_layernorm.weight"), {hidden}, TensorRole::kNorm, i});
    if (config.mla) {
      AppendMla(config, i, specs);
      specs.push_back(
          {LayerName(i, "post_attention_layernorm.weight"), {hidden}, TensorRole::kNorm, i});
      if (config.is_moe() && config.moe_layer[i]) {
        specs.push_back(
            {RouterName(config, i), {config.num_experts, hidden}, TensorRole::kRouter, i});
        if (config.score_correction_bias) {
          specs.push_back({RouterBiasName(i), {config.num_experts}, TensorRole::kRouterBias, i});
        }
        for (int e = 0; e < config.num_experts; ++e) {
          AppendSwiGlu(
              i, hidden, config.moe_intermediate_size,
              [&](ExpertPart p) { return ExpertName(config, i, e, p); }, specs);
        }
        if (config.n_shared_experts > 0) {
          AppendSwiGlu(
              i, hidden, int64_t{config.n_shared_experts} * config.moe_intermediate_size,
              [&](ExpertPart p) { return SharedExpertName(i, p); }, specs);
        }
      } else {
        AppendSwiGlu(
            i, hidden, config.intermediate_size, [&](ExpertPart p) { return DenseMlpName(i, p); },
            specs);
      }
      continue;
    }
    const std::pair<const char*, int64_t> projections[] = {
        {"q_proj", config.q_dim()}, {"k_proj", config.kv_dim()}, {"v_proj", config.kv_dim()}};
    for (const auto& [proj, rows] : projections) {
      specs.push_back(
          {AttentionName(i, proj, "weight"), {rows, hidden}, TensorRole::kAttentionIn, i});
      if (config.attention_bias) {
        specs.push_back({AttentionName(i, proj, "bias"), {rows}, TensorRole::kAttentionBias, i});
      }
    }
    specs.push_back({AttentionName(i, "o_proj", "weight"),
                     {hidden, config.q_dim()},
                     TensorRole::kAttentionOut,
                     i});
    if (config.qk_norm) {
      specs.push_back(
          {LayerName(i, "self_attn.q_norm.weight"), {config.head_dim}, TensorRole::kNorm, i});
      specs.push_back(
          {LayerName(i, "self_attn.k_norm.weight"), {config.head_dim}, TensorRole::kNorm, i});
    }
    specs.push_back(
        {LayerName(i, "post_attention_layernorm.weight"), {hidden}, TensorRole::kNorm, i});
    if (config.is_moe() && config.moe_layer[i]) {
      const int64_t width = config.moe_intermediate_size;
      specs.push_back(
          {RouterName(config, i), {config.num_experts, hidden}, TensorRole::kRouter, i});
      for (int e = 0; e < config.num_experts; ++e) {
        specs.push_back(
            {ExpertName(config, i, e, ExpertPart::kGate), {width, hidden}, TensorRole::kMlpIn, i});
        specs.push_back(
            {ExpertName(config, i, e, ExpertPart::kUp), {width, hidden}, TensorRole::kMlpIn, i});
        specs.push_back(
            {ExpertName(config, i, e, ExpertPart::kDown), {hidden, width}, TensorRole::kMlpOut, i});
      }
    } else {
      const int64_t width = config.intermediate_size;
      specs.push_back({DenseMlpName(i, ExpertPart::kGate), {width, hidden}, TensorRole::kMlpIn, i});
      specs.push_back({DenseMlpName(i, ExpertPart::kUp), {width, hidden}, TensorRole::kMlpIn, i});
      specs.push_back(
          {DenseMlpName(i, ExpertPart::kDown), {hidden, width}, TensorRole::kMlpOut, i});
    }
  }
  specs.push_back({FinalNormName(), {hidden}, TensorRole::kNorm});
  if (!config.tie_word_embeddings) {
    specs.push_back({LmHeadName(), {config.vocab_size, hidden}, TensorRole::kLmHead});
  }
  if (config.fp8.enabled) {
    for (TensorSpec& spec : specs) spec.fp8 = spec.layer >= 0 && IsProjection(spec.role);
  }
  return specs;
}

}  // namespace lockstep::engine
