// Multi-head latent attention (DeepSeek-V2/V3) of one layer over a latent KV cache.
//
// Per token the layer computes c = RMSNorm(kv_a(x)[0, kv_lora_rank)) and k_pe = RoPE
// of kv_a(x)[kv_lora_rank, latent_dim) (one rotary key part shared by all heads), and
// caches only [c | k_pe] (latent_dim values): the pool's layout has one KV head whose K
// plane holds the first cache_head_dim values and whose V plane holds the rest
// (ModelConfig::cache_head_dim). Head h's key is [W_UK_h c | k_pe] and its value
// W_UV_h c, with W_UK_h, W_UV_h the rows of kv_b_proj for h.
//
// Two forms, equal up to rounding (a test checks it):
//   kAbsorbed: W_UK_h folded into the query (q_nope W_UK_h scores against c directly),
//     the weighted sum taken over the latent vectors, W_UV_h applied once after: the
//     decode form, O(kv_lora_rank) per cached token and head.
//   kExpanded: each cached token's key and value expanded per head, then ordinary
//     attention (the textbook form).
// The query: q_b(RMSNorm(q_a(x))) or q_proj(x), per head [q_nope | q_pe], q_pe rotated
// (interleaved pairs, rope.h). Scores use ModelConfig::softmax_scale() (YaRN-corrected).
//
// A row's output depends only on its own query and its sequence's cache, in a fixed
// order: bitwise independent of the batch. Thread-compatible; Forward is const.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_MLA_ATTENTION_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_MLA_ATTENTION_H_

#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

enum class MlaForm { kAbsorbed, kExpanded };

class MlaAttention {
 public:
  explicit MlaAttention(const ModelConfig& config) : config_(config) {}

  // x: the normed hidden states [rows, hidden]; cos/sin: [rows, qk_rope_head_dim / 2]
  // (magnitude included); out: [rows, heads * v_head_dim], the input of o_proj. Writes
  // each row's latent vector into its sequence's cache before attending.
  void Forward(int layer, const MlaWeights& w, const ForwardInput& input, const KvPoolView& pool,
               const float* x, const float* cos, const float* sin, MlaForm form, float* out,
               Arena& arena, ThreadPool* threads) const;

 private:
  const ModelConfig& config_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MLA_ATTENTION_H_
