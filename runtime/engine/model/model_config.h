// The architecture of a decoder-only transformer, read from a Hugging Face
// `config.json` (model types llama, mistral, qwen2, mixtral, qwen2_moe, qwen3_moe, and
// the DeepSeek-V3 family: deepseek_v3, kimi_k2; the latter parsed in
// model_config_deepseek.cc).
//
// Only what the engines implement is accepted: features they lack (sliding-window
// attention, rope scaling other than the DeepSeek family's YaRN, Qwen's shared expert,
// MLP bias, another activation) are rejected
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

// How the router turns its logits into expert scores.
enum class ExpertScoring {
  kSoftmax,  // softmax over all experts (mixtral, qwen; DeepSeek-V2-style configs)
  kSigmoid,  // an independent sigmoid per expert (DeepSeek-V3)
};

// Multi-head latent attention (DeepSeek-V2/V3). Per token, K and V come from one
// compressed vector: kv_a_proj_with_mqa gives kv_lora_rank values (normalised by
// kv_a_layernorm) and a qk_rope_head_dim key part shared by every head (rotated);
// kv_b_proj expands the former into each head's qk_nope_head_dim key part and
// v_head_dim value. The KV cache keeps only the normalised compressed vector and the
// rotated shared key part (latent_dim() values per token and layer).
struct MlaDims {
  int32_t q_lora_rank = 0;  // 0 (null in config.json): q_proj straight from the hidden state
  int32_t kv_lora_rank = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;
  int32_t v_head_dim = 0;

  int32_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int32_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

// YaRN RoPE scaling (`rope_scaling` or transformers 5's `rope_parameters`, type yarn).
struct YarnScaling {
  double factor = 1.0;
  int64_t original_max_position = 0;  // absent: max_position_embeddings
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;  // 0: absent

  // 0.1 * m * ln(factor) + 1 (1 when factor <= 1): YaRN's magnitude correction.
  double Mscale(double m) const;
  // What cos and sin are multiplied by: Mscale(mscale) / Mscale(mscale_all_dim).
  double RopeMagnitude() const;
  // What the softmax scale is multiplied by: Mscale(mscale_all_dim)^2 (1 when absent).
  double SoftmaxFactor() const;
};

// `quantization_config` of an FP8 checkpoint: F8_E4M3 weights, one f32 weight_scale_inv
// per block of weight_block_size (only [128, 128]); activations stay f32 here.
struct Fp8Quantization {
  bool enabled = false;
  int32_t block_rows = 128;
  int32_t block_cols = 128;
};

struct ModelConfig {
  std::string model_type;  // llama | mistral | qwen2 | mixtral | qwen2_moe | qwen3_moe |
                           // deepseek_v3 | kimi_k2
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
  // Routing (DeepSeek-V3 fields; the defaults are mixtral's and qwen's routing).
  ExpertScoring scoring = ExpertScoring::kSoftmax;
  // topk_method noaux_tc: mlp.gate.e_score_correction_bias is added to the scores to
  // choose the experts (not to weight them).
  bool score_correction_bias = false;
  int32_t n_group = 1;     // experts fall in n_group equal groups...
  int32_t topk_group = 1;  // ...of which the topk_group best (sum of top-2) are eligible
  double routed_scaling_factor = 1.0;  // multiplies the routed experts' weights
  // Shared experts: one SwiGLU of width n_shared_experts * moe_intermediate_size run for
  // every token of a MoE layer (mlp.shared_experts).
  int32_t n_shared_experts = 0;
  int32_t first_k_dense_replace = 0;  // kept for ModelConfigToJson (moe_layer has it)
  int32_t moe_layer_freq = 1;

  // DeepSeek-V3 family only.
  bool mla = false;  // multi-head latent attention with `mla_dims`
  MlaDims mla_dims;
  bool yarn = false;  // RoPE with `yarn_scaling`
  YarnScaling yarn_scaling;
  int32_t num_nextn_predict_layers = 0;  // multi-token-prediction layers (not loaded)
  Fp8Quantization fp8;

  bool is_moe() const { return num_experts > 0; }
  bool is_deepseek() const { return model_type == "deepseek_v3" || model_type == "kimi_k2"; }
  int32_t q_dim() const { return num_heads * head_dim; }
  int32_t kv_dim() const { return num_kv_heads * head_dim; }
  // The rotary dimension (qk_rope_head_dim under MLA, else head_dim).
  int32_t rope_dim() const { return mla ? mla_dims.qk_rope_head_dim : head_dim; }
  // The attention softmax scale: 1 / sqrt(q/k head dim), times YaRN's correction.
  double softmax_scale() const;

  // The KV cache's shape, decided here for every engine and pool: per token and layer,
  // cache_kv_heads() K planes and as many V planes of cache_head_dim() values. Plain
  // attention: the model's KV heads. MLA: one head whose K and V planes hold the two
  // halves of the latent vector (latent_dim() rounded up to even), so the pools, the
  // block accounting and KV transfer see an ordinary layout.
  int32_t cache_kv_heads() const { return mla ? 1 : num_kv_heads; }
  int32_t cache_head_dim() const { return mla ? (mla_dims.latent_dim() + 1) / 2 : head_dim; }
  // Values cached per token over all layers.
  int64_t kv_values_per_token() const {
    return int64_t{2} * num_layers * cache_kv_heads() * cache_head_dim();
  }

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
