// What ParseModelConfig uses for a config.json field that is absent, per model_type:
// the default of that type's configuration class in Hugging Face transformers, so that a
// config loads into the same architecture here as in transformers. Where the class has
// no default for a field, the field is required (refused when absent, by name), never
// guessed. Private to the :model_config target.
//
// Constant data; thread-safe.
#ifndef LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_
#define LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace lockstep::engine::config_defaults {

// Integer defaults that are not a plain value.
inline constexpr int64_t kRequired = -1;        // no default: the field must be given
inline constexpr int64_t kNone = -2;            // Python's None: no token, no window
inline constexpr int64_t kAttentionHeads = -3;  // num_attention_heads of the config
inline constexpr int64_t kHiddenPerHead = -4;   // hidden_size / num_attention_heads

// The DeepSeek-V3 family's own fields (DeepseekV3Config; where transformers' class has
// no such field, the value its modeling code hard-wires, which is also the default of
// the checkpoints' own configuration_deepseek.py).
struct DeepseekDefaults {
  int64_t q_lora_rank;
  int64_t kv_lora_rank;
  int64_t qk_nope_head_dim;
  int64_t qk_rope_head_dim;
  int64_t v_head_dim;
  int64_t n_shared_experts;
  double routed_scaling_factor;
  int64_t n_group;
  int64_t topk_group;
  int64_t first_k_dense_replace;
  int64_t moe_layer_freq;
  const char* topk_method;
  const char* scoring_func;
  int64_t num_nextn_predict_layers;
  // rope_scaling type yarn: absent fields.
  double yarn_beta_fast;
  double yarn_beta_slow;
  double yarn_mscale;
  double yarn_mscale_all_dim;  // 0: none
};
extern const DeepseekDefaults kDeepseekV3;

// One model_type's defaults (field names as in config.json). A field with an initializer
// here holds the value that most of the classes share; a row states it only where its
// class differs.
struct FamilyDefaults {
  const char* model_type;
  const char* transformers_class;  // where the row comes from
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  int64_t num_key_value_heads;
  // What an explicit `"num_key_value_heads": null` means: kAttentionHeads where the
  // class maps None to the head count, kRequired where it does not.
  int64_t num_key_value_heads_if_null = kAttentionHeads;
  int64_t head_dim = kHiddenPerHead;
  int64_t max_position_embeddings;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // types that read the field (the Qwen 2 types always have bias)
  int64_t bos_token_id = kNone;
  int64_t eos_token_id = kNone;
  int64_t sliding_window = kNone;  // mistral-style window when absent (kNone: full attention)
  // Mixture of experts (0 / false for dense types).
  int64_t num_experts = 0;  // num_local_experts for mixtral
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;  // mixtral: intermediate_size is the expert width
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;              // read by the Qwen MoE types only
  int64_t shared_expert_intermediate_size = 0;  // qwen2_moe (0 elsewhere)
  const DeepseekDefaults* deepseek = nullptr;   // the DeepSeek-V3 family's own fields
};

// The row of `model_type`; null when the type is not supported.
const FamilyDefaults* FindFamilyDefaults(absl::string_view model_type);

// The supported model types, comma-separated in table order (for error messages).
std::string SupportedModelTypes();

}  // namespace lockstep::engine::config_defaults

#endif  // LOCKSTEP_RUNTIME_ENGINE_MODEL_MODEL_CONFIG_DEFAULTS_H_
