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
  kLmHead,
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
  int layer = -1;  // -1 outside the layers
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

// Every tensor the model needs, in a fixed order.
std::vector<TensorSpec> ModelTensorSpecs(const ModelConfig& config);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_TENSOR_NAMES_H_
