#include "runtime/engine/model/weight_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

WeightSource Matrix(std::string label, std::vector<TensorPart> parts, int cols) {
  WeightSource w;
  w.label = std::move(label);
  for (const TensorPart& part : parts) w.rows += part.rows;
  w.parts = std::move(parts);
  w.cols = cols;
  return w;
}

WeightSource Vector(std::string label, std::vector<TensorPart> parts) {
  return Matrix(std::move(label), std::move(parts), 0);
}

SwiGluSource SwiGlu(const std::string& label, const std::string& gate, const std::string& up,
                    const std::string& down, int width, int hidden) {
  SwiGluSource mlp;
  mlp.width = width;
  mlp.gate_up = Matrix(absl::StrCat(label, ".gate_up"), {{gate, width}, {up, width}}, hidden);
  mlp.down = Matrix(absl::StrCat(label, ".down"), {{down, hidden}}, width);
  return mlp;
}

void PlanMla(const ModelConfig& config, int i, LayerSource& layer) {
  const MlaDims& d = config.mla_dims;
  const int hidden = config.hidden_size;
  const int heads = config.num_heads;
  const std::string label = LayerName(i, "");
  auto name = [&](const char* what) { return absl::StrCat(label, what); };
  MlaSource& m = layer.mla_parts;
  layer.mla = true;
  m.q_a.label = name("q_a");
  m.q_a_norm.label = name("q_a_norm");
  m.q_b.label = name("q_b");
  m.q.label = name("q");
  if (d.q_lora_rank > 0) {
    m.q_a = Matrix(name("q_a"), {{MlaName(i, "q_a_proj"), d.q_lora_rank}}, hidden);
    m.q_a_norm = Vector(name("q_a_norm"), {{MlaName(i, "q_a_layernorm"), d.q_lora_rank}});
    m.q_b = Matrix(name("q_b"), {{MlaName(i, "q_b_proj"), heads * d.qk_head_dim()}}, d.q_lora_rank);
  } else {
    m.q = Matrix(name("q"), {{MlaName(i, "q_proj"), heads * d.qk_head_dim()}}, hidden);
  }
  m.kv_a = Matrix(name("kv_a"), {{MlaName(i, "kv_a_proj_with_mqa"), d.latent_dim()}}, hidden);
  m.kv_a_norm = Vector(name("kv_a_norm"), {{MlaName(i, "kv_a_layernorm"), d.kv_lora_rank}});
  m.kv_b =
      Matrix(name("kv_b"), {{MlaName(i, "kv_b_proj"), heads * (d.qk_nope_head_dim + d.v_head_dim)}},
             d.kv_lora_rank);
  layer.o = Matrix(name("o"), {{MlaName(i, "o_proj"), hidden}}, heads * d.v_head_dim);
}

LayerSource PlanLayer(const ModelConfig& config, int i, int rank, int world_size,
                      const ExpertLayout& layout) {
  const int hidden = config.hidden_size;
  const std::string label = LayerName(i, "");
  auto name = [&](const char* what) { return absl::StrCat(label, what); };
  LayerSource layer;
  layer.attn_norm = Vector(name("attn_norm"), {{LayerName(i, "input_layernorm.weight"), hidden}});
  layer.mlp_norm =
      Vector(name("mlp_norm"), {{LayerName(i, "post_attention_layernorm.weight"), hidden}});
  if (config.mla) {
    PlanMla(config, i, layer);
  } else {
    layer.qkv = Matrix(name("qkv"),
                       {{AttentionName(i, "q_proj", "weight"), config.q_dim()},
                        {AttentionName(i, "k_proj", "weight"), config.kv_dim()},
                        {AttentionName(i, "v_proj", "weight"), config.kv_dim()}},
                       hidden);
    layer.o = Matrix(name("o"), {{AttentionName(i, "o_proj", "weight"), hidden}}, config.q_dim());
  }
  layer.qkv_bias.label = name("qkv_bias");
  if (config.attention_bias) {
    layer.qkv_bias =
        Vector(name("qkv_bias"), {{AttentionName(i, "q_proj", "bias"), config.q_dim()},
                                  {AttentionName(i, "k_proj", "bias"), config.kv_dim()},
                                  {AttentionName(i, "v_proj", "bias"), config.kv_dim()}});
  }
  layer.q_norm.label = name("q_norm");
  layer.k_norm.label = name("k_norm");
  if (config.qk_norm) {
    layer.q_norm =
        Vector(name("q_norm"), {{LayerName(i, "self_attn.q_norm.weight"), config.head_dim}});
    layer.k_norm =
        Vector(name("k_norm"), {{LayerName(i, "self_attn.k_norm.weight"), config.head_dim}});
  }
  layer.is_moe = config.is_moe() && config.moe_layer[i];
  if (!layer.is_moe) {
    layer.mlp =
        SwiGlu(name("mlp"), DenseMlpName(i, ExpertPart::kGate), DenseMlpName(i, ExpertPart::kUp),
               DenseMlpName(i, ExpertPart::kDown), config.intermediate_size, hidden);
    return layer;
  }
  layer.router = Matrix(name("router"), {{RouterName(config, i), config.num_experts}}, hidden);
  layer.router_bias.label = name("router_bias");
  if (config.score_correction_bias) {
    layer.router_bias = Vector(name("router_bias"), {{RouterBiasName(i), config.num_experts}});
  }
  if (config.n_shared_experts > 0) {
    layer.shared =
        SwiGlu(name("shared_experts"), SharedExpertName(i, ExpertPart::kGate),
               SharedExpertName(i, ExpertPart::kUp), SharedExpertName(i, ExpertPart::kDown),
               config.n_shared_experts * config.moe_intermediate_size, hidden);
  }
  if (i < static_cast<int>(layout.size()) && !layout[i].empty()) {
    layer.layout = layout[i];
    layer.held = layout[i][rank];
  } else {
    layer.local = ExpertsOfRank(config.num_experts, rank, world_size);
    for (int e = layer.local.first; e < layer.local.end; ++e) layer.held.push_back(e);
  }
  for (int e : layer.held) {
    layer.experts.push_back(
        SwiGlu(absl::StrCat(label, "experts.", e), ExpertName(config, i, e, ExpertPart::kGate),
               ExpertName(config, i, e, ExpertPart::kUp),
               ExpertName(config, i, e, ExpertPart::kDown), config.moe_intermediate_size, hidden));
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

ModelPlan PlanWeights(const ModelConfig& config, int rank, int world_size,
                      const ExpertLayout& layout) {
  const int hidden = config.hidden_size;
  ModelPlan plan;
  plan.embedding = Matrix("model.embedding", {{EmbeddingName(), config.vocab_size}}, hidden);
  for (int i = 0; i < config.num_layers; ++i) {
    plan.layers.push_back(PlanLayer(config, i, rank, world_size, layout));
  }
  plan.final_norm = Vector("model.final_norm", {{FinalNormName(), hidden}});
  plan.tied_lm_head = config.tie_word_embeddings;
  plan.lm_head = plan.tied_lm_head
                     ? plan.embedding
                     : Matrix("model.lm_head", {{LmHeadName(), config.vocab_size}}, hidden);
  return plan;
}

std::vector<const WeightSource*> ModelPlan::All() const {
  std::vector<const WeightSource*> all;
  auto add = [&](const WeightSource& w) {
    if (!w.parts.empty()) all.push_back(&w);
  };
  add(embedding);
  for (const LayerSource& layer : layers) {
    for (const WeightSource* w : {&layer.attn_norm, &layer.qkv, &layer.qkv_bias, &layer.q_norm,
                                  &layer.k_norm, &layer.o, &layer.mlp_norm}) {
      add(*w);
    }
    const MlaSource& m = layer.mla_parts;
    for (const WeightSource* w :
         {&m.q_a, &m.q_a_norm, &m.q_b, &m.q, &m.kv_a, &m.kv_a_norm, &m.kv_b}) {
      add(*w);
    }
    if (!layer.is_moe) {
      add(layer.mlp.gate_up);
      add(layer.mlp.down);
      continue;
    }
    add(layer.router);
    add(layer.router_bias);
    for (const SwiGluSource& expert : layer.experts) {
      add(expert.gate_up);
      add(expert.down);
    }
    add(layer.shared.gate_up);
    add(layer.shared.down);
  }
  add(final_norm);
  if (!tied_lm_head) add(lm_head);
  return all;
}

size_t ModelPlan::TotalElements() const {
  size_t total = 0;
  for (const WeightSource* w : All()) total += w->elements();
  return total;
}

absl::StatusOr<std::vector<float>> ReadWeight(const SafetensorsModel& tensors,
                                              const WeightSource& weight) {
  if (weight.parts.size() == 1) {
    const TensorPart& part = weight.parts[0];
    return weight.is_vector() ? tensors.ReadFloat(part.name, {part.rows})
                              : tensors.ReadFloat(part.name, {part.rows, weight.cols});
  }
  std::vector<float> stacked;
  stacked.reserve(weight.elements());
  for (const TensorPart& part : weight.parts) {
    ASSIGN_OR_RETURN(std::vector<float> values,
                     weight.is_vector() ? tensors.ReadFloat(part.name, {part.rows})
                                        : tensors.ReadFloat(part.name, {part.rows, weight.cols}));
    stacked.insert(stacked.end(), values.begin(), values.end());
  }
  return stacked;
}

}  // namespace lockstep::engine
