// The architecture of a decoder-only transformer, read from a Hugging Face
// `config.json` (model types llama, mistral, qwen2, mixtral, qwen2_moe, qwen3_moe).
//
// Only what the engines (CPU and CUDA) implement is accepted: features it lacks (sliding-window
// attention, rope scaling, shared experts, MLP bias, another activation) are rejected
// with a message naming the config field; an unknown model type names `model_type`.
// An absent field takes the default of the model type's configuration class in Hugging
// Face transformers (model_config_defaults.cc), or is refused by name where that class
// has none.
//
// Value type; thread-compatible.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::engine {

// How the MoE tensors are named on disk.
enum class MoeNaming {
  kMixtral,  // block_sparse_moe.gate / block_sparse_moe.experts.{e}.w1|w2|w3
  kQwen,     // mlp.gate / mlp.experts.{e}.gate_proj|up_proj|down_proj
};

struct ModelConfig {
  std::string model_type;  // llama | mistral | qwen2 | mixtral | qwen2_moe | qwen3_moe
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;  // dense MLP width
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int64_t max_position = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (always for qwen2)
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (qwen3)
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;

  // Mixture of experts (num_experts == 0: every layer is dense).
  int32_t num_experts = 0;
  int32_t num_experts_per_tok = 0;
  int32_t moe_intermediate_size = 0;  // width of one expert
  bool norm_topk_prob = true;         // renormalise the top-k routing weights
  MoeNaming moe_naming = MoeNaming::kMixtral;
  // moe_layer[i]: layer i uses the MoE block (size num_layers; all false when dense).
  std::vector<bool> moe_layer;

  bool is_moe() const { return num_experts > 0; }
  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }

  // Checks the dimensions agree; errors name the field.
  absl::Status Validate() const;
};

// Parses the text of a config.json; `source` (a file name) prefixes every error.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, absl::string_view source);

// Reads `<dir>/config.json`.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

// The config.json text for `config` (Hugging Face field names; parses back equal).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_H_
