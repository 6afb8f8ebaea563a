#include "runtime/engine/weights.h"

#include <utility>

#include "common/status_macros.h"
#include "runtime/engine/tensor_names.h"

namespace lockstep::engine {
namespace {

// Reads several [rows_i, cols] tensors and packs them stacked as one matrix.
absl::StatusOr<PackedMatrix> ReadStacked(const SafetensorsModel& tensors,
                                         const std::vector<std::pair<std::string, int>>& parts,
                                         int cols) {
  std::vector<float> stacked;
  int rows = 0;
  for (const auto& [name, part_rows] : parts) {
    ASSIGN_OR_RETURN(std::vector<float> values, tensors.ReadFloat(name, {part_rows, cols}));
    stacked.insert(stacked.end(), values.begin(), values.end());
    rows += part_rows;
  }
  return PackedMatrix::Pack(stacked, rows, cols);
}

absl::StatusOr<std::vector<float>> ReadVector(const SafetensorsModel& tensors,
                                              const std::string& name, int size) {
  return tensors.ReadFloat(name, {size});
}

absl::StatusOr<SwiGluWeights> ReadSwiGlu(const SafetensorsModel& tensors, const std::string& gate,
                                         const std::string& up, const std::string& down, int width,
                                         int hidden) {
  SwiGluWeights mlp;
  mlp.width = width;
  ASSIGN_OR_RETURN(mlp.gate_up, ReadStacked(tensors, {{gate, width}, {up, width}}, hidden));
  ASSIGN_OR_RETURN(mlp.down, ReadStacked(tensors, {{down, hidden}}, width));
  return mlp;
}

absl::StatusOr<LayerWeights> ReadLayer(const SafetensorsModel& tensors, const ModelConfig& config,
                                       int i, int rank, int world_size) {
  const int hidden = config.hidden_size;
  LayerWeights layer;
  ASSIGN_OR_RETURN(layer.attn_norm,
                   ReadVector(tensors, LayerName(i, "input_layernorm.weight"), hidden));
  ASSIGN_OR_RETURN(layer.mlp_norm,
                   ReadVector(tensors, LayerName(i, "post_attention_layernorm.weight"), hidden));
  ASSIGN_OR_RETURN(layer.qkv, ReadStacked(tensors,
                                          {{AttentionName(i, "q_proj", "weight"), config.q_dim()},
                                           {AttentionName(i, "k_proj", "weight"), config.kv_dim()},
                                           {AttentionName(i, "v_proj", "weight"), config.kv_dim()}},
                                          hidden));
  if (config.attention_bias) {
    for (const auto& [proj, size] : {std::pair{"q_proj", config.q_dim()},
                                     {"k_proj", config.kv_dim()},
                                     {"v_proj", config.kv_dim()}}) {
      ASSIGN_OR_RETURN(std::vector<float> bias,
                       ReadVector(tensors, AttentionName(i, proj, "bias"), size));
      layer.qkv_bias.insert(layer.qkv_bias.end(), bias.begin(), bias.end());
    }
  }
  if (config.qk_norm) {
    ASSIGN_OR_RETURN(layer.q_norm,
                     ReadVector(tensors, LayerName(i, "self_attn.q_norm.weight"), config.head_dim));
    ASSIGN_OR_RETURN(layer.k_norm,
                     ReadVector(tensors, LayerName(i, "self_attn.k_norm.weight"), config.head_dim));
  }
  ASSIGN_OR_RETURN(layer.o, ReadStacked(tensors, {{AttentionName(i, "o_proj", "weight"), hidden}},
                                        config.q_dim()));
  layer.is_moe = config.is_moe() && config.moe_layer[i];
  if (!layer.is_moe) {
    ASSIGN_OR_RETURN(
        layer.mlp,
        ReadSwiGlu(tensors, DenseMlpName(i, ExpertPart::kGate), DenseMlpName(i, ExpertPart::kUp),
                   DenseMlpName(i, ExpertPart::kDown), config.intermediate_size, hidden));
    return layer;
  }
  ASSIGN_OR_RETURN(layer.moe.router,
                   ReadStacked(tensors, {{RouterName(config, i), config.num_experts}}, hidden));
  layer.moe.local = ExpertsOfRank(config.num_experts, rank, world_size);
  for (int e = layer.moe.local.first; e < layer.moe.local.end; ++e) {
    ASSIGN_OR_RETURN(SwiGluWeights expert,
                     ReadSwiGlu(tensors, ExpertName(config, i, e, ExpertPart::kGate),
                                ExpertName(config, i, e, ExpertPart::kUp),
                                ExpertName(config, i, e, ExpertPart::kDown),
                                config.moe_intermediate_size, hidden));
    layer.moe.experts.push_back(std::move(expert));
  }
  return layer;
}

}  // namespace

ExpertRange ExpertsOfRank(int num_experts, int rank, int world_size) {
  return {static_cast<int>(static_cast<int64_t>(rank) * num_experts / world_size),
          static_cast<int>(static_cast<int64_t>(rank + 1) * num_experts / world_size)};
}

int ExpertOwner(int num_experts, int world_size, int expert) {
  for (int rank = 0; rank + 1 < world_size; ++rank) {
    if (expert < ExpertsOfRank(num_experts, rank, world_size).end) return rank;
  }
  return world_size - 1;
}

absl::StatusOr<ModelWeights> LoadWeights(const SafetensorsModel& tensors, const ModelConfig& config,
                                         int rank, int world_size) {
  const int hidden = config.hidden_size;
  ModelWeights weights;
  ASSIGN_OR_RETURN(weights.embedding,
                   tensors.ReadFloat(EmbeddingName(), {config.vocab_size, hidden}));
  for (int i = 0; i < config.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights layer, ReadLayer(tensors, config, i, rank, world_size));
    weights.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(weights.final_norm, ReadVector(tensors, FinalNormName(), hidden));
  if (config.tie_word_embeddings) {
    weights.lm_head = PackedMatrix::Pack(weights.embedding, config.vocab_size, hidden);
  } else {
    ASSIGN_OR_RETURN(weights.lm_head,
                     ReadStacked(tensors, {{LmHeadName(), config.vocab_size}}, hidden));
  }
  return weights;
}

}  // namespace lockstep::engine
