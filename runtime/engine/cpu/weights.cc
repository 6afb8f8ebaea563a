#include "runtime/engine/cpu/weights.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<PackedMatrix> ReadPacked(const SafetensorsModel& tensors, const WeightSource& w) {
  ASSIGN_OR_RETURN(std::vector<float> values, ReadWeight(tensors, w));
  return PackedMatrix::Pack(values, w.rows, w.cols);
}

// An optional vector: empty when the plan has no parts for it.
absl::StatusOr<std::vector<float>> ReadOptional(const SafetensorsModel& tensors,
                                                const WeightSource& w) {
  if (w.parts.empty()) return std::vector<float>();
  return ReadWeight(tensors, w);
}

absl::StatusOr<SwiGluWeights> ReadSwiGlu(const SafetensorsModel& tensors, const SwiGluSource& s) {
  SwiGluWeights mlp;
  mlp.width = s.width;
  ASSIGN_OR_RETURN(mlp.gate_up, ReadPacked(tensors, s.gate_up));
  ASSIGN_OR_RETURN(mlp.down, ReadPacked(tensors, s.down));
  return mlp;
}

// An optional matrix: empty when the plan has no parts for it.
absl::StatusOr<PackedMatrix> ReadOptionalPacked(const SafetensorsModel& tensors,
                                                const WeightSource& w) {
  if (w.parts.empty()) return PackedMatrix();
  return ReadPacked(tensors, w);
}

absl::StatusOr<MlaWeights> ReadMla(const SafetensorsModel& tensors, const MlaSource& s) {
  MlaWeights mla;
  ASSIGN_OR_RETURN(mla.q_a, ReadOptionalPacked(tensors, s.q_a));
  ASSIGN_OR_RETURN(mla.q_a_norm, ReadOptional(tensors, s.q_a_norm));
  ASSIGN_OR_RETURN(mla.q_b, ReadOptionalPacked(tensors, s.q_b));
  ASSIGN_OR_RETURN(mla.q, ReadOptionalPacked(tensors, s.q));
  ASSIGN_OR_RETURN(mla.kv_a, ReadPacked(tensors, s.kv_a));
  ASSIGN_OR_RETURN(mla.kv_a_norm, ReadWeight(tensors, s.kv_a_norm));
  ASSIGN_OR_RETURN(mla.kv_b, ReadWeight(tensors, s.kv_b));
  return mla;
}

absl::StatusOr<LayerWeights> ReadLayer(const SafetensorsModel& tensors, const LayerSource& s) {
  LayerWeights layer;
  ASSIGN_OR_RETURN(layer.attn_norm, ReadWeight(tensors, s.attn_norm));
  ASSIGN_OR_RETURN(layer.mlp_norm, ReadWeight(tensors, s.mlp_norm));
  layer.mla = s.mla;
  if (s.mla) {
    ASSIGN_OR_RETURN(layer.mla_w, ReadMla(tensors, s.mla_parts));
  } else {
    ASSIGN_OR_RETURN(layer.qkv, ReadPacked(tensors, s.qkv));
  }
  ASSIGN_OR_RETURN(layer.qkv_bias, ReadOptional(tensors, s.qkv_bias));
  ASSIGN_OR_RETURN(layer.q_norm, ReadOptional(tensors, s.q_norm));
  ASSIGN_OR_RETURN(layer.k_norm, ReadOptional(tensors, s.k_norm));
  ASSIGN_OR_RETURN(layer.o, ReadPacked(tensors, s.o));
  layer.is_moe = s.is_moe;
  if (!layer.is_moe) {
    ASSIGN_OR_RETURN(layer.mlp, ReadSwiGlu(tensors, s.mlp));
    return layer;
  }
  ASSIGN_OR_RETURN(layer.moe.router, ReadPacked(tensors, s.router));
  ASSIGN_OR_RETURN(layer.moe.score_bias, ReadOptional(tensors, s.router_bias));
  if (s.shared.width > 0) {
    ASSIGN_OR_RETURN(layer.shared, ReadSwiGlu(tensors, s.shared));
  }
  layer.moe.local = s.local;
  layer.moe.held = s.held;
  if (!s.layout.empty()) {
    layer.moe.replicas.resize(s.router.rows);  // the router has a row per expert
    for (size_t r = 0; r < s.layout.size(); ++r) {
      for (int e : s.layout[r]) layer.moe.replicas[e].push_back(static_cast<int>(r));
    }
  }
  for (const SwiGluSource& expert : s.experts) {
    ASSIGN_OR_RETURN(SwiGluWeights weights, ReadSwiGlu(tensors, expert));
    layer.moe.experts.push_back(std::move(weights));
  }
  return layer;
}

}  // namespace

absl::StatusOr<LayerWeights> LoadLayerWeights(const SafetensorsModel& tensors,
                                              const LayerSource& source) {
  return ReadLayer(tensors, source);
}

absl::StatusOr<ModelWeights> LoadWeights(const SafetensorsModel& tensors, const ModelConfig& config,
                                         int rank, int world_size, const ExpertLayout& layout) {
  for (size_t l = 0; l < layout.size(); ++l) {
    if (!layout[l].empty() && static_cast<int>(layout[l].size()) != world_size) {
      return absl::InvalidArgumentError(absl::StrCat("expert layout of layer ", l, " names ",
                                                     layout[l].size(), " ranks, not ",
                                                     world_size));
    }
    for (const std::vector<int>& experts : layout[l]) {
      for (int e : experts) {
        if (e < 0 || e >= config.num_experts) {
          return absl::InvalidArgumentError(absl::StrCat("expert layout of layer ", l,
                                                         " names expert ", e, " of ",
                                                         config.num_experts));
        }
      }
    }
  }
  const ModelPlan plan = PlanWeights(config, rank, world_size, layout);
  ModelWeights weights;
  ASSIGN_OR_RETURN(weights.embedding, ReadWeight(tensors, plan.embedding));
  for (const LayerSource& source : plan.layers) {
    ASSIGN_OR_RETURN(LayerWeights layer, ReadLayer(tensors, source));
    weights.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(weights.final_norm, ReadWeight(tensors, plan.final_norm));
  if (plan.tied_lm_head) {
    weights.lm_head = PackedMatrix::Pack(weights.embedding, config.vocab_size, config.hidden_size);
  } else {
    ASSIGN_OR_RETURN(weights.lm_head, ReadPacked(tensors, plan.lm_head));
  }
  return weights;
}

}  // namespace lockstep::engine
