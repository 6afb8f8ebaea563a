#include "runtime/engine/model/model_config_defaults.h"

#include "absl/strings/str_cat.h"

namespace lockstep::engine::config_defaults {

// DeepseekV3Config (transformers' deepseek_v3/configuration_deepseek_v3.py). It has no
// topk_method, scoring_func, moe_layer_freq or num_nextn_predict_layers: its modeling
// code always routes by noaux_tc over sigmoid scores, makes every layer from
// first_k_dense_replace on a MoE layer and builds no MTP layer. YaRN's defaults are
// those of transformers' RoPE initialisation (beta_fast 32, beta_slow 1, no mscale).
const DeepseekDefaults kDeepseekV3 = {.q_lora_rank = 1536,
                                      .kv_lora_rank = 512,
                                      .qk_nope_head_dim = 128,
                                      .qk_rope_head_dim = 64,
                                      .v_head_dim = 128,
                                      .n_shared_experts = 1,
                                      .routed_scaling_factor = 2.5,
                                      .n_group = 8,
                                      .topk_group = 4,
                                      .first_k_dense_replace = 3,
                                      .moe_layer_freq = 1,
                                      .topk_method = "noaux_tc",
                                      .scoring_func = "sigmoid",
                                      .num_nextn_predict_layers = 0,
                                      .yarn_beta_fast = 32.0,
                                      .yarn_beta_slow = 1.0,
                                      .yarn_mscale = 1.0,
                                      .yarn_mscale_all_dim = 0.0};

namespace {

// Each row: the defaults of the configuration class named in it, in
// src/transformers/models/<type>/configuration_<type>.py of Hugging Face transformers
// (read for this table; 4.x and 5.x agree on these values, 5.x moving rope_theta into
// rope_parameters with the same per-class default). Where a class has no field, the
// row gives what the type's modeling code uses (a fixed bias, hidden_size / heads for
// head_dim), or kRequired when that is not the family's shape. A field a row leaves out
// has the value of FamilyDefaults' initializer (model_config_defaults.h).
constexpr FamilyDefaults kFamilies[] = {
    // LlamaConfig: num_key_value_heads and head_dim None, filled from the head count.
    {.model_type = "llama",
     .transformers_class = "LlamaConfig",
     .vocab_size = 32000,
     .hidden_size = 4096,
     .intermediate_size = 11008,
     .num_hidden_layers = 32,
     .num_attention_heads = 32,
     .num_key_value_heads = kAttentionHeads,
     .max_position_embeddings = 2048,
     .bos_token_id = 1,
     .eos_token_id = 2},
    // MistralConfig: 8 KV heads and a 4096-token sliding window unless given.
    {.model_type = "mistral",
     .transformers_class = "MistralConfig",
     .vocab_size = 32000,
     .hidden_size = 4096,
     .intermediate_size = 14336,
     .num_hidden_layers = 32,
     .num_attention_heads = 32,
     .num_key_value_heads = 8,
     .max_position_embeddings = 4096 * 32,
     .bos_token_id = 1,
     .eos_token_id = 2,
     .sliding_window = 4096},
    // MixtralConfig: rope_theta 1e6 and rms_norm_eps 1e-5, 8 KV heads, no window; the
    // routing weights are always renormalised (no norm_topk_prob field).
    {.model_type = "mixtral",
     .transformers_class = "MixtralConfig",
     .vocab_size = 32000,
     .hidden_size = 4096,
     .intermediate_size = 14336,
     .num_hidden_layers = 32,
     .num_attention_heads = 32,
     .num_key_value_heads = 8,
     .max_position_embeddings = 4096 * 32,
     .rms_norm_eps = 1e-5,
     .rope_theta = 1e6,
     .bos_token_id = 1,
     .eos_token_id = 2,
     .num_experts = 8,
     .num_experts_per_tok = 2,
     .norm_topk_prob = true},
    // Qwen2Config: 32 KV heads when absent (not the head count), no BOS / EOS.
    {.model_type = "qwen2",
     .transformers_class = "Qwen2Config",
     .vocab_size = 151936,
     .hidden_size = 4096,
     .intermediate_size = 22016,
     .num_hidden_layers = 32,
     .num_attention_heads = 32,
     .num_key_value_heads = 32,
     .max_position_embeddings = 32768,
     .attention_bias = true},
    // Qwen2MoeConfig: a 5632-wide shared expert unless given (the engine needs 0).
    {.model_type = "qwen2_moe",
     .transformers_class = "Qwen2MoeConfig",
     .vocab_size = 151936,
     .hidden_size = 2048,
     .intermediate_size = 5632,
     .num_hidden_layers = 24,
     .num_attention_heads = 16,
     .num_key_value_heads = 16,
     .num_key_value_heads_if_null = kRequired,
     .max_position_embeddings = 32768,
     .attention_bias = true,
     .num_experts = 60,
     .num_experts_per_tok = 4,
     .moe_intermediate_size = 1408,
     .shared_expert_intermediate_size = 5632},
    // Qwen3MoeConfig: no head_dim field, and Qwen 3 checkpoints' head_dim is not
    // hidden_size / heads (128 against 2048 / 32): required.
    {.model_type = "qwen3_moe",
     .transformers_class = "Qwen3MoeConfig",
     .vocab_size = 151936,
     .hidden_size = 2048,
     .intermediate_size = 6144,
     .num_hidden_layers = 24,
     .num_attention_heads = 32,
     .num_key_value_heads = 4,
     .num_key_value_heads_if_null = kRequired,
     .head_dim = kRequired,
     .max_position_embeddings = 32768,
     .num_experts = 128,
     .num_experts_per_tok = 8,
     .moe_intermediate_size = 768},
    // DeepseekV3Config: 128 KV heads (MLA ignores them), BOS 0, EOS 1; the MLA, routing
    // and shared-expert fields are in kDeepseekV3. kimi_k2 is an alias (kAliases).
    {.model_type = "deepseek_v3",
     .transformers_class = "DeepseekV3Config",
     .vocab_size = 129280,
     .hidden_size = 7168,
     .intermediate_size = 18432,
     .num_hidden_layers = 61,
     .num_attention_heads = 128,
     .num_key_value_heads = 128,
     .head_dim = kRequired,  // not read: the MLA dimensions decide it
     .max_position_embeddings = 4096,
     .bos_token_id = 0,
     .eos_token_id = 1,
     .num_experts = 256,
     .num_experts_per_tok = 8,
     .moe_intermediate_size = 2048,
     .norm_topk_prob = true,
     .deepseek = &kDeepseekV3},
};

// Model types that name another type's configuration class: Kimi-K2's configs say
// kimi_k2 for DeepseekV3Config's architecture.
struct TypeAlias {
  const char* model_type;
  const char* same_as;
};
constexpr TypeAlias kAliases[] = {{"kimi_k2", "deepseek_v3"}};

}  // namespace

const FamilyDefaults* FindFamilyDefaults(absl::string_view model_type) {
  for (const TypeAlias& alias : kAliases) {
    if (model_type == alias.model_type) model_type = alias.same_as;
  }
  for (const FamilyDefaults& row : kFamilies) {
    if (model_type == row.model_type) return &row;
  }
  return nullptr;
}

std::string SupportedModelTypes() {
  std::string out;
  for (const FamilyDefaults& row : kFamilies) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", row.model_type);
  }
  for (const TypeAlias& alias : kAliases) absl::StrAppend(&out, ", ", alias.model_type);
  return out;
}

}  // namespace lockstep::engine::config_defaults
