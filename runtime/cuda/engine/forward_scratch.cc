#include "runtime/cuda/engine/forward_scratch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/moe_desc.h"

namespace lockstep::cuda {
namespace {

constexpr size_t kAlign = 256;

// Hands out aligned byte ranges of one allocation.
class Regions {
 public:
  size_t Take(size_t bytes) {
    const size_t offset = end_;
    end_ = (end_ + std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    return offset;
  }
  size_t end() const { return end_; }

 private:
  size_t end_ = 0;
};

// The split scratch of `items` decode work items (DecodeScratchFloats).
size_t DecodeScratchBytes(int64_t items, int num_heads, int head_dim) {
  return sizeof(float) * static_cast<size_t>(items) * num_heads * (head_dim + 1);
}

// The attention kernels' limits, here so that a model they cannot run is refused at
// load rather than at its first decode step.
absl::Status CheckAttention(const engine::ModelConfig& config) {
  if (config.yarn) {
    return absl::UnimplementedError(absl::StrCat("engine cuda: model_type ", config.model_type,
                                                 " with YaRN RoPE outside the DeepSeek-V3 family"));
  }
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("engine cuda: ", config.num_heads,
                                                   " attention heads over ", config.num_kv_heads,
                                                   " KV heads is no whole GQA group"));
  }
  if (const int group = config.num_heads / config.num_kv_heads; group > kernels::kMaxDecodeGroup) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine cuda: a GQA group of ", group, " (", config.num_heads, " heads over ",
        config.num_kv_heads, " KV heads) exceeds the decode kernel's ", kernels::kMaxDecodeGroup));
  }
  if (const int limit = std::min(kernels::kMaxDecodeHeadDim, kernels::kMaxPrefillHeadDim);
      config.head_dim < 1 || config.head_dim > limit) {
    return absl::InvalidArgumentError(absl::StrCat("engine cuda: head_dim ", config.head_dim,
                                                   " is outside the attention kernels' 1..",
                                                   limit));
  }
  return absl::OkStatus();
}

// The MLA kernels' limits (mla_kernels.h).
absl::Status CheckMla(const engine::ModelConfig& config) {
  const engine::MlaDims& d = config.mla_dims;
  if (d.latent_dim() % 2 != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "engine cuda: kv_lora_rank ", d.kv_lora_rank, " + qk_rope_head_dim ", d.qk_rope_head_dim,
        " is odd; the CUDA engine caches an even latent vector only"));
  }
  if (d.latent_dim() > kernels::kMaxMlaLatent || d.qk_rope_head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine cuda: a latent vector of ", d.latent_dim(), " (kv_lora_rank ", d.kv_lora_rank,
        " + qk_rope_head_dim ", d.qk_rope_head_dim, ") exceeds the MLA kernel's ",
        kernels::kMaxMlaLatent, " or has an odd rotary part"));
  }
  return absl::OkStatus();
}

// The grouped routing kernel's limits (grouped_route_kernel.h).
absl::Status CheckGroupedRouting(const engine::ModelConfig& config) {
  if (config.num_experts > kernels::kMaxGroupedExperts ||
      config.num_experts_per_tok > kernels::kMaxGroupedTopK ||
      config.n_group > kernels::kMaxExpertGroups) {
    return absl::InvalidArgumentError(absl::StrCat(
        "engine cuda: ", config.num_experts, " routed experts (top ", config.num_experts_per_tok,
        ") in ", config.n_group, " groups exceed the grouped routing kernel's ",
        kernels::kMaxGroupedExperts, " (top ", kernels::kMaxGroupedTopK, ") in ",
        kernels::kMaxExpertGroups));
  }
  return absl::OkStatus();
}

}  // namespace

int MaxLocalExperts(int num_experts, int world_size) {
  return (num_experts + world_size - 1) / world_size;
}

MoeExchange MoeExchangeFor(int64_t rows, int k, int max_local, int world_size) {
  MoeExchange e;
  e.groups = world_size;
  e.capacity = static_cast<int32_t>(world_size == 1 ? rows * k : rows * std::min(k, max_local));
  e.total_rows = e.groups * e.capacity;
  e.max_tiles = kernels::MaxGroupedGemmTiles(e.total_rows, e.groups, max_local);
  return e;
}

absl::StatusOr<ScratchLayout> PlanScratch(const engine::ModelConfig& config,
                                          const ScratchOptions& o) {
  if (o.max_rows < 1 || o.max_seqs < 1 || o.max_decode_rows < 1 || o.max_table_stride < 1 ||
      o.max_splits < 1 || o.world_size < 1 || (o.element_bytes != 2 && o.element_bytes != 4)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scratch of max_rows ", o.max_rows, ", max_seqs ", o.max_seqs, ", max_decode_rows ",
        o.max_decode_rows, ", table stride ", o.max_table_stride, ", max_splits ", o.max_splits,
        ", world ", o.world_size, ", ", o.element_bytes, "-byte elements"));
  }
  if (config.mla) {
    RETURN_IF_ERROR(CheckMla(config));
  } else {
    RETURN_IF_ERROR(CheckAttention(config));
  }
  if (config.is_moe() && config.is_deepseek()) RETURN_IF_ERROR(CheckGroupedRouting(config));
  if (config.is_moe() && config.num_experts < o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(config.num_experts, " experts over ",
                                                   o.world_size, " ranks: a rank without experts"));
  }
  const size_t rows = static_cast<size_t>(o.max_rows);
  const size_t logit_rows = static_cast<size_t>(std::min(o.max_decode_rows, o.max_rows));
  const size_t e = static_cast<size_t>(o.element_bytes);
  const size_t hidden = config.hidden_size;

  ScratchLayout l;
  StepShape& step = l.max_step;
  step.rows = static_cast<int32_t>(rows);
  step.logit_rows = static_cast<int32_t>(logit_rows);
  step.seqs = o.max_seqs + 1;
  step.table_stride = o.max_table_stride;
  step.decode_rows = static_cast<int32_t>(logit_rows);
  step.decode_items = static_cast<int32_t>(logit_rows) * o.max_splits;
  step.prefill_tiles = static_cast<int32_t>((rows + kernels::kMaxPrefillTileRows - 1) /
                                            kernels::kMaxPrefillTileRows) +
                       o.max_seqs;
  l.input_bytes = LayoutStep(step).bytes;

  Regions r;
  l.input = r.Take(l.input_bytes);
  l.h = r.Take(rows * hidden * e);
  l.normed = r.Take(rows * hidden * e);
  l.qkv = r.Take(rows * (config.q_dim() + 2 * config.kv_dim()) * e);
  const size_t attn_width = config.mla
                                ? static_cast<size_t>(config.num_heads) * config.mla_dims.v_head_dim
                                : static_cast<size_t>(config.q_dim());
  l.attn = r.Take(rows * attn_width * e);
  if (config.mla) {
    const engine::MlaDims& d = config.mla_dims;
    const size_t heads = config.num_heads;
    l.mla_q_low = r.Take(rows * std::max(d.q_lora_rank, 1) * e);
    l.mla_q = r.Take(rows * heads * d.qk_head_dim() * e);
    l.mla_kv = r.Take(rows * d.latent_dim() * e);
    l.mla_q_lat = r.Take(rows * heads * 2 * config.cache_head_dim() * sizeof(float));
    l.mla_acc = r.Take(rows * heads * d.kv_lora_rank * sizeof(float));
  }
  l.delta = r.Take(rows * hidden * e);
  bool dense = false;
  for (int i = 0; i < config.num_layers; ++i)
    dense = dense || !(config.is_moe() && config.moe_layer[i]);
  const size_t shared_width =
      config.is_moe() ? static_cast<size_t>(config.n_shared_experts) * config.moe_intermediate_size
                      : 0;
  const size_t mlp_width =
      std::max(dense ? static_cast<size_t>(config.intermediate_size) : 0, shared_width);
  if (mlp_width > 0) {
    l.gate_up = r.Take(rows * 2 * mlp_width * e);
    l.act = r.Take(rows * mlp_width * e);
  }
  if (shared_width > 0) l.shared_out = r.Take(rows * hidden * e);
  l.decode_scratch =
      r.Take(DecodeScratchBytes(step.decode_items, config.num_heads, config.head_dim));
  l.final_rows = r.Take(logit_rows * hidden * e);
  l.logits = r.Take(logit_rows * config.vocab_size * sizeof(float));
  if (config.is_moe()) {
    const int k = config.num_experts_per_tok;
    const int max_local = MaxLocalExperts(config.num_experts, o.world_size);
    const size_t entries = rows * k;
    l.max_exchange = MoeExchangeFor(o.max_rows, k, max_local, o.world_size);
    const size_t space = static_cast<size_t>(l.max_exchange.total_rows);
    const size_t width = config.moe_intermediate_size;
    l.router_logits = r.Take(rows * config.num_experts * sizeof(float));
    l.experts = r.Take(entries * sizeof(int32_t));
    l.weights = r.Take(entries * sizeof(float));
    l.offsets = r.Take((config.num_experts + 1) * sizeof(int32_t));
    l.entry_of_slot = r.Take(entries * sizeof(int32_t));
    l.slot_of_entry = r.Take(entries * sizeof(int32_t));
    l.dest = r.Take(entries * sizeof(int32_t));
    l.send_counts = r.Take(static_cast<size_t>(o.world_size) * max_local * sizeof(int32_t));
    l.recv_counts = r.Take(static_cast<size_t>(o.world_size) * max_local * sizeof(int32_t));
    l.tiles =
        r.Take(static_cast<size_t>(l.max_exchange.max_tiles) * sizeof(kernels::GroupedGemmTile));
    l.x_send = r.Take(space * hidden * e);
    // One rank exchanges nothing: the experts read the send layout and write back into y.
    l.x_recv = o.world_size == 1 ? l.x_send : r.Take(space * hidden * e);
    l.expert_gate_up = r.Take(space * 2 * width * e);
    l.expert_act = r.Take(space * width * e);
    l.y = r.Take(space * hidden * e);
    l.y_back = o.world_size == 1 ? l.y : r.Take(space * hidden * e);
  }
  if (o.mtp) {
    l.hidden_in = r.Take(rows * hidden * e);
    l.mtp_both = r.Take(rows * 2 * hidden * e);
  }
  l.bytes = r.end();
  return l;
}

}  // namespace lockstep::cuda
