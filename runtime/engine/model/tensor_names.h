// The Hugging Face tensor names and shapes of a model, by config: what the loader
// reads and what make-model writes (one list serves both).
//
//   model.embed_tokens.weight                               [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight                 [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ q/k/v bias; qwen3 q_norm/k_norm)
//   model.layers.{i}.post_attention_layernorm.weight        [hidden]
//   dense:   model.layers.{i}.mlp.{gate,up,down}_proj.weight
//   mixtral: model.layers.{i}.block_sparse_moe.gate.weight, ...experts.{e}.w1|w2|w3.weight
//   qwen:    model.layers.{i}.mlp.gate.weight, mlp.experts.{e}.{gate,up,down}_proj.weight
//   model.norm.weight, lm_head.weight (absent when tied)
//
// The DeepSeek-V3 family (config.mla) instead has, per layer:
//   self_attn.q_a_proj [q_lora_rank, hidden], q_a_layernorm [q_lora_rank],
//     q_b_proj [heads * qk_head_dim, q_lora_rank]  (or, q_lora_rank null: q_proj)
//   self_attn.kv_a_proj_with_mqa [kv_lora_rank + qk_rope_head_dim, hidden],
//     kv_a_layernorm [kv_lora_rank], kv_b_proj [heads * (qk_nope + v_head_dim), kv_lora_rank]
//   self_attn.o_proj [hidden, heads * v_head_dim]
//   MoE layers: mlp.gate.weight, mlp.gate.e_score_correction_bias [experts],
//     mlp.experts.{e}.*, mlp.shared_experts.{gate,up,down}_proj (width n_shared * moe)
//   dense layers (below first_k_dense_replace): mlp.{gate,up,down}_proj
// With FP8 quantization every layer's projection (not the norms, the router or its
// bias) is stored F8_E4M3 with a `<name>_scale_inv` block-scale tensor (TensorSpec::fp8).
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_TENSOR_NAMES_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_TENSOR_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

// What a tensor is, so a writer can choose its values.
enum class TensorRole {
  kEmbedding,
  kNorm,         // RMSNorm weight (input, post-attention, final, q/k norm)
  kAttentionIn,  // q/k/v projection
  kAttentionBias,
  kAttentionOut,  // o projection
  kMlpIn,         // gate/up projection (dense or expert)
  kMlpOut,        // down projection (dense or expert)
  kRouter,
  kRouterBias,  // e_score_correction_bias
  kLmHead,
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
  int layer = -1;  // -1 outside the layers
  // Stored F8_E4M3 with a block-scale tensor (config.fp8 and a layer's projection).
  bool fp8 = false;
};

enum class ExpertPart { kGate, kUp, kDown };

std::string EmbeddingName();
std::string FinalNormName();
std::string LmHeadName();
std::string LayerName(int layer, const std::string& suffix);  // model.layers.{i}.{suffix}
// "q_proj" | "k_proj" | "v_proj" | "o_proj" with "weight" | "bias".
std::string AttentionName(int layer, const std::string& proj, const std::string& kind);
std::string DenseMlpName(int layer, ExpertPart part);
std::string RouterName(const ModelConfig& config, int layer);
std::string ExpertName(const ModelConfig& config, int layer, int expert, ExpertPart part);
// The DeepSeek-V3 family's.
std::string SharedExpertName(int layer, ExpertPart part);  // mlp.shared_experts.*
std::string RouterBiasName(int layer);                     // mlp.gate.e_score_correction_bias
// MLA's attention tensors (q_a_proj, q_a_layernorm, ..., o_proj) with ".weight".
std::string MlaName(int layer, const std::string& tensor);

// Every tensor the model needs, in a fixed order.
std::vector<TensorSpec> ModelTensorSpecs(const ModelConfig& config);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_TENSOR_NAMES_H_
